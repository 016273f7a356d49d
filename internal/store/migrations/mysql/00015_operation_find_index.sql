-- The operators' search over every request (store.OperationFind): newest
-- first over the whole table, or of one target, as a keyset page (no
-- OFFSET). (created_at, id) serves the listing without a filter and the
-- attention view (its conditions filter the rows read newest first);
-- (target_key, created_at, id) the listing of one target. The listing of
-- one person uses idx_operation_subject_created.

-- +goose Up
ALTER TABLE operation ADD KEY idx_operation_created (created_at, id),
  ADD KEY idx_operation_target_created (target_key, created_at, id);

-- +goose Down
ALTER TABLE operation DROP KEY idx_operation_target_created, DROP KEY idx_operation_created;
