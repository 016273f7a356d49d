-- The operations that name a grant: its renewals and its revocation. Same
-- logical change as migrations/mysql/00013; an index needs no table
-- rebuild on SQLite. The status read follows a grant's chain of renewals
-- one link per read on it (store.OperationRenewalsOf).

-- +goose Up
CREATE INDEX idx_operation_grant ON operation (grant_operation_id, id);

-- +goose Down
DROP INDEX idx_operation_grant;
