-- The operations that name a grant (docs/flows/lifecycle.md, "Renewal", "The old
-- request's page"): its renewals (kind GRANT with grant_operation_id, read
-- back as RENEW) and its revocation. A grant's status read follows the
-- chain of renewals from the grant to the request that carries its access
-- now, one link per read (store.OperationRenewalsOf); without this index
-- each link would scan the whole operation table. (grant_operation_id, id)
-- so the renewals of one grant come back in the order they were created
-- without a sort. Most rows have no grant_operation_id (NULL): the index
-- costs little on them.

-- +goose Up
ALTER TABLE operation ADD KEY idx_operation_grant (grant_operation_id, id);

-- +goose Down
ALTER TABLE operation DROP KEY idx_operation_grant;
