-- Membership history names the waiting-set row each member was claimed
-- from. A request row is claimed by at most one batch (I2): the unique index
-- makes the database itself refuse a second claim of the same row, even
-- after the row was deleted by a failed-batch settlement and its operation
-- re-admitted under a new row id (AUTOINCREMENT never reuses an id). NULL
-- only for rows written before this version; NULLs never collide.

-- +goose Up
ALTER TABLE merge_batch_history ADD COLUMN request_id BIGINT NULL;
CREATE UNIQUE INDEX uk_merge_batch_history_request ON merge_batch_history (request_id);

-- +goose Down
DROP INDEX uk_merge_batch_history_request;
ALTER TABLE merge_batch_history DROP COLUMN request_id;
