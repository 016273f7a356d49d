-- Renewal (docs/flows/lifecycle.md, "Renewal"): a renewal is a grant on the
-- binding of the grant in effect it renews. The new binding status
-- RENEWING (the access in effect, a renewal of it under way) joins every
-- CHECK constraint that lists binding statuses.
--
-- A renewal is stored as kind GRANT with grant_operation_id naming the
-- grant it renews (the store reads it back as RENEW), so operation.kind's
-- CHECK is unchanged.

-- +goose Up
ALTER TABLE binding DROP CONSTRAINT ck_binding_status;
ALTER TABLE binding
  ADD CONSTRAINT ck_binding_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED', 'RENEWING'));

ALTER TABLE binding_history DROP CONSTRAINT ck_binding_history_status;
ALTER TABLE binding_history
  ADD CONSTRAINT ck_binding_history_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED', 'RENEWING'));

ALTER TABLE operation_step DROP CONSTRAINT ck_operation_step_from_status;
ALTER TABLE operation_step DROP CONSTRAINT ck_operation_step_to_status;
ALTER TABLE operation_step
  ADD CONSTRAINT ck_operation_step_from_status CHECK (from_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED', 'RENEWING')),
  ADD CONSTRAINT ck_operation_step_to_status CHECK (to_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED', 'RENEWING'));

-- +goose Down
ALTER TABLE binding DROP CONSTRAINT ck_binding_status;
ALTER TABLE binding
  ADD CONSTRAINT ck_binding_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED'));

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
