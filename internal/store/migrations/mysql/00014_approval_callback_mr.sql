-- The callback inbox keeps the ext.mrId an approval callback claimed, so a
-- replay of a recorded delivery is checked against what it claimed, not
-- against the request's own MR. Before, a delivery recorded and not yet
-- checked (the process died in between, or a replay raced the check) was
-- replayed with the request's MR as its ext.mrId, so a callback naming
-- another MR passed the guard it should have failed. NULL: recorded
-- before this column (replayed as before, with the request's MR). A
-- nullable column without a default is an instant ALTER on MariaDB 10.3+.

-- +goose Up
ALTER TABLE approval_callback ADD COLUMN mr_id VARCHAR(64) NULL;

-- +goose Down
ALTER TABLE approval_callback DROP COLUMN mr_id;
