-- Revocation (docs/flows/lifecycle.md, "Revocation"): a revocation is its own
-- operation on the binding of the grant it ends.
--
-- operation.kind: GRANT (every row before this migration) or REVOKE.
-- operation.grant_operation_id: for a revocation, the grant whose entry it
-- removes — the only entry it may remove (entries changeflow did not write
-- are never removed). operation.revoke_reason: EXPIRED, GIVEN_BACK or
-- OPERATOR (a closed set: it labels a metric).
--
-- The three new binding statuses (REVOKING, REVOKED, REVOKE_FAILED) join
-- every CHECK constraint that lists binding statuses.
--
-- idx_binding_status_expires serves the expiry scan: VALIDATED rows whose
-- expires_at has passed, read as a range of the index in chunks.

-- +goose Up
ALTER TABLE operation
  ADD COLUMN kind VARCHAR(8) NOT NULL DEFAULT 'GRANT' AFTER flow,
  ADD COLUMN grant_operation_id VARCHAR(64) NULL AFTER kind,
  ADD COLUMN revoke_reason VARCHAR(16) NULL AFTER grant_operation_id,
  ADD CONSTRAINT ck_operation_kind CHECK (kind IN ('GRANT', 'REVOKE')),
  ADD CONSTRAINT ck_operation_revoke_reason CHECK (revoke_reason IS NULL OR revoke_reason IN ('EXPIRED', 'GIVEN_BACK', 'OPERATOR'));

ALTER TABLE binding DROP CONSTRAINT ck_binding_status;
ALTER TABLE binding
  ADD CONSTRAINT ck_binding_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED')),
  ADD KEY idx_binding_status_expires (status, expires_at, id);

ALTER TABLE binding_history DROP CONSTRAINT ck_binding_history_status;
ALTER TABLE binding_history
  ADD CONSTRAINT ck_binding_history_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED'));

ALTER TABLE operation_step DROP CONSTRAINT ck_operation_step_from_status;
ALTER TABLE operation_step DROP CONSTRAINT ck_operation_step_to_status;
ALTER TABLE operation_step
  ADD CONSTRAINT ck_operation_step_from_status CHECK (from_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED')),
  ADD CONSTRAINT ck_operation_step_to_status CHECK (to_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED'));

-- +goose Down
ALTER TABLE operation_step DROP CONSTRAINT ck_operation_step_from_status;
ALTER TABLE operation_step DROP CONSTRAINT ck_operation_step_to_status;
ALTER TABLE operation_step
  ADD CONSTRAINT ck_operation_step_from_status CHECK (from_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED')),
  ADD CONSTRAINT ck_operation_step_to_status CHECK (to_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED'));
ALTER TABLE binding_history DROP CONSTRAINT ck_binding_history_status;
ALTER TABLE binding_history
  ADD CONSTRAINT ck_binding_history_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED'));
ALTER TABLE binding DROP KEY idx_binding_status_expires;
ALTER TABLE binding DROP CONSTRAINT ck_binding_status;
ALTER TABLE binding
  ADD CONSTRAINT ck_binding_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED'));
ALTER TABLE operation
  DROP CONSTRAINT ck_operation_revoke_reason,
  DROP CONSTRAINT ck_operation_kind,
  DROP COLUMN revoke_reason,
  DROP COLUMN grant_operation_id,
  DROP COLUMN kind;
