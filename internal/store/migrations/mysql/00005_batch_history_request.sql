-- Membership history names the waiting-set row each member was claimed
-- from. A request row is claimed by at most one batch (I2): the unique key
-- makes the database itself refuse a second claim of the same row, even
-- after the row was deleted by a failed-batch settlement and its operation
-- re-admitted under a new row id (InnoDB keeps the AUTO_INCREMENT counter
-- across restarts from MariaDB 10.2.4 and MySQL 8, so ids are not reused).
-- NULL only for rows written before this version (there were none in a
-- release); NULLs never collide.

-- +goose Up
ALTER TABLE merge_batch_history ADD COLUMN request_id BIGINT NULL AFTER batch_id;
CREATE UNIQUE INDEX uk_merge_batch_history_request ON merge_batch_history (request_id);

-- +goose Down
DROP INDEX uk_merge_batch_history_request ON merge_batch_history;
ALTER TABLE merge_batch_history DROP COLUMN request_id;
