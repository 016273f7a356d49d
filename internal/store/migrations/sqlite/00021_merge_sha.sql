-- The merge commit of a request's MR (docs/storage.md, "operation",
-- "merge_batch" and "access_interval"). Same logical change as
-- migrations/mysql/00021, where each column is explained; SQLite
-- difference: ADD COLUMN goes last.

-- +goose Up
ALTER TABLE operation ADD COLUMN merge_sha VARCHAR(64) NULL;
ALTER TABLE merge_batch ADD COLUMN merge_sha VARCHAR(64) NULL;

-- +goose Down
ALTER TABLE merge_batch DROP COLUMN merge_sha;
ALTER TABLE operation DROP COLUMN merge_sha;
