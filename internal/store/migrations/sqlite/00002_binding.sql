-- Current state per (subject, target) (I5) and its append-only history.

-- +goose Up
CREATE TABLE binding (
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

CREATE TABLE binding_history (
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
CREATE INDEX idx_binding_history_relationship ON binding_history (subject_id, target_key, id);

-- +goose Down
DROP TABLE binding_history;
DROP TABLE binding;
