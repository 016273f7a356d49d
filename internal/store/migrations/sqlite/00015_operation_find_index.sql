-- The operators' search over every request (store.OperationFind): newest
-- first, optionally by target; by person it uses
-- idx_operation_subject_created. Same logical change as
-- migrations/mysql/00015; an index needs no table rebuild on SQLite.

-- +goose Up
CREATE INDEX idx_operation_created ON operation (created_at, id);
CREATE INDEX idx_operation_target_created ON operation (target_key, created_at, id);

-- +goose Down
DROP INDEX idx_operation_target_created;
DROP INDEX idx_operation_created;
