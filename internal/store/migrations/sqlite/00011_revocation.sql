-- Revocation (docs/flows/lifecycle.md, "Revocation"): a revocation is its own
-- operation on the binding of the grant it ends. Same logical change as
-- migrations/mysql/00011; SQLite cannot alter a CHECK constraint, so the
-- three tables whose CHECK lists binding statuses (binding,
-- binding_history, operation_step) are rebuilt with the three new
-- statuses (REVOKING, REVOKED, REVOKE_FAILED) and their rows copied, ids
-- kept; their indexes and the updated_at trigger are created again.
--
-- operation.kind: GRANT (every row before this migration) or REVOKE;
-- operation.grant_operation_id: the grant a revocation removes the entry
-- of (the only entry it may remove); operation.revoke_reason: EXPIRED,
-- GIVEN_BACK or OPERATOR. idx_binding_status_expires serves the expiry
-- scan.

-- +goose Up
ALTER TABLE operation ADD COLUMN kind VARCHAR(8) NOT NULL DEFAULT 'GRANT' CHECK (kind IN ('GRANT', 'REVOKE'));
ALTER TABLE operation ADD COLUMN grant_operation_id VARCHAR(64) NULL;
ALTER TABLE operation ADD COLUMN revoke_reason VARCHAR(16) NULL CHECK (revoke_reason IS NULL OR revoke_reason IN ('EXPIRED', 'GIVEN_BACK', 'OPERATOR'));

CREATE TABLE binding_new (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  subject_id   VARCHAR(128) NOT NULL,
  target_key   VARCHAR(128) NOT NULL,
  status       VARCHAR(32)  NOT NULL,
  operation_id VARCHAR(64)  NOT NULL,
  expires_at   DATETIME     NULL,
  version      BIGINT       NOT NULL DEFAULT 1,
  created_at   DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  updated_at   DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_binding_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED')),
  CONSTRAINT ck_binding_version CHECK (version >= 1)
);
INSERT INTO binding_new (id, subject_id, target_key, status, operation_id, expires_at, version, created_at, updated_at)
  SELECT id, subject_id, target_key, status, operation_id, expires_at, version, created_at, updated_at FROM binding;
DROP TABLE binding;
ALTER TABLE binding_new RENAME TO binding;
CREATE UNIQUE INDEX uk_binding_subject_target ON binding (subject_id, target_key);
CREATE INDEX idx_binding_operation ON binding (operation_id);
CREATE INDEX idx_binding_status_updated ON binding (status, updated_at);

-- +goose StatementBegin
CREATE TRIGGER trg_binding_updated_at AFTER UPDATE ON binding
FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
  UPDATE binding SET updated_at = strftime('%Y-%m-%d %H:%M:%f','now') WHERE id = NEW.id;
END;
-- +goose StatementEnd

CREATE TABLE binding_history_new (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  subject_id   VARCHAR(128) NOT NULL,
  target_key   VARCHAR(128) NOT NULL,
  operation_id VARCHAR(64)  NOT NULL,
  status       VARCHAR(32)  NOT NULL,
  expires_at   DATETIME     NULL,
  created_at   DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_binding_history_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED'))
);
INSERT INTO binding_history_new (id, subject_id, target_key, operation_id, status, expires_at, created_at)
  SELECT id, subject_id, target_key, operation_id, status, expires_at, created_at FROM binding_history;
DROP TABLE binding_history;
ALTER TABLE binding_history_new RENAME TO binding_history;
CREATE INDEX idx_binding_history_relationship ON binding_history (subject_id, target_key, id);

CREATE TABLE operation_step_new (
  id                  INTEGER PRIMARY KEY AUTOINCREMENT,
  operation_id        VARCHAR(64)  NOT NULL,
  from_step           INT          NULL,
  to_step             INT          NOT NULL,
  from_binding_status VARCHAR(32)  NULL,
  to_binding_status   VARCHAR(32)  NULL,
  actor               VARCHAR(128) NOT NULL DEFAULT '',
  note                VARCHAR(512) NOT NULL DEFAULT '',
  created_at          DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_operation_step_from_status CHECK (from_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED')),
  CONSTRAINT ck_operation_step_to_status CHECK (to_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED',
    'REVOKING', 'REVOKED', 'REVOKE_FAILED'))
);
INSERT INTO operation_step_new (id, operation_id, from_step, to_step, from_binding_status, to_binding_status, actor, note, created_at)
  SELECT id, operation_id, from_step, to_step, from_binding_status, to_binding_status, actor, note, created_at FROM operation_step;
DROP TABLE operation_step;
ALTER TABLE operation_step_new RENAME TO operation_step;
CREATE INDEX idx_operation_step_operation ON operation_step (operation_id, id);
CREATE INDEX idx_binding_status_expires ON binding (status, expires_at, id);

-- +goose Down
CREATE TABLE binding_new (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  subject_id   VARCHAR(128) NOT NULL,
  target_key   VARCHAR(128) NOT NULL,
  status       VARCHAR(32)  NOT NULL,
  operation_id VARCHAR(64)  NOT NULL,
  expires_at   DATETIME     NULL,
  version      BIGINT       NOT NULL DEFAULT 1,
  created_at   DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  updated_at   DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_binding_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED')),
  CONSTRAINT ck_binding_version CHECK (version >= 1)
);
INSERT INTO binding_new (id, subject_id, target_key, status, operation_id, expires_at, version, created_at, updated_at)
  SELECT id, subject_id, target_key, status, operation_id, expires_at, version, created_at, updated_at FROM binding;
DROP TABLE binding;
ALTER TABLE binding_new RENAME TO binding;
CREATE UNIQUE INDEX uk_binding_subject_target ON binding (subject_id, target_key);
CREATE INDEX idx_binding_operation ON binding (operation_id);
CREATE INDEX idx_binding_status_updated ON binding (status, updated_at);

-- +goose StatementBegin
CREATE TRIGGER trg_binding_updated_at AFTER UPDATE ON binding
FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
  UPDATE binding SET updated_at = strftime('%Y-%m-%d %H:%M:%f','now') WHERE id = NEW.id;
END;
-- +goose StatementEnd

CREATE TABLE binding_history_new (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  subject_id   VARCHAR(128) NOT NULL,
  target_key   VARCHAR(128) NOT NULL,
  operation_id VARCHAR(64)  NOT NULL,
  status       VARCHAR(32)  NOT NULL,
  expires_at   DATETIME     NULL,
  created_at   DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_binding_history_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED'))
);
INSERT INTO binding_history_new (id, subject_id, target_key, operation_id, status, expires_at, created_at)
  SELECT id, subject_id, target_key, operation_id, status, expires_at, created_at FROM binding_history;
DROP TABLE binding_history;
ALTER TABLE binding_history_new RENAME TO binding_history;
CREATE INDEX idx_binding_history_relationship ON binding_history (subject_id, target_key, id);

CREATE TABLE operation_step_new (
  id                  INTEGER PRIMARY KEY AUTOINCREMENT,
  operation_id        VARCHAR(64)  NOT NULL,
  from_step           INT          NULL,
  to_step             INT          NOT NULL,
  from_binding_status VARCHAR(32)  NULL,
  to_binding_status   VARCHAR(32)  NULL,
  actor               VARCHAR(128) NOT NULL DEFAULT '',
  note                VARCHAR(512) NOT NULL DEFAULT '',
  created_at          DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_operation_step_from_status CHECK (from_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED')),
  CONSTRAINT ck_operation_step_to_status CHECK (to_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED'))
);
INSERT INTO operation_step_new (id, operation_id, from_step, to_step, from_binding_status, to_binding_status, actor, note, created_at)
  SELECT id, operation_id, from_step, to_step, from_binding_status, to_binding_status, actor, note, created_at FROM operation_step;
DROP TABLE operation_step;
ALTER TABLE operation_step_new RENAME TO operation_step;
CREATE INDEX idx_operation_step_operation ON operation_step (operation_id, id);
ALTER TABLE operation DROP COLUMN revoke_reason;
ALTER TABLE operation DROP COLUMN grant_operation_id;
ALTER TABLE operation DROP COLUMN kind;
