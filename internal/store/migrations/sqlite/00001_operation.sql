-- Requests (one row per operationId) and their step history.
-- Same logical tables as migrations/mysql; SQLite differences:
--   * times are TEXT 'YYYY-MM-DD HH:MM:SS.SSS' UTC (strftime %f, ms), which
--     sort chronologically as strings; DATETIME makes the driver scan them
--     into time.Time;
--   * indexes are separate statements (their names are database-wide);
--   * ON UPDATE for updated_at is a trigger.
-- docs/storage.md explains every column group and index.

-- +goose Up
CREATE TABLE operation (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  operation_id     VARCHAR(64)   NOT NULL,
  subject          VARCHAR(128)  NOT NULL,
  target_key       VARCHAR(128)  NOT NULL,
  project_id       BIGINT        NOT NULL,
  flow             VARCHAR(16)   NOT NULL,
  step_status      INT           NOT NULL,
  version          BIGINT        NOT NULL DEFAULT 1,
  batch_id         BIGINT        NULL,
  mr_iid           BIGINT        NULL,
  mr_url           VARCHAR(512)  NULL,
  branch           VARCHAR(255)  NULL,
  approval_id      VARCHAR(128)  NULL,
  reason           VARCHAR(1024) NOT NULL DEFAULT '',
  days             INT           NULL,
  expires_at       DATETIME      NULL,
  request_hash     CHAR(64)      NOT NULL DEFAULT '',
  next_action      VARCHAR(64)   NULL,
  due_at           DATETIME      NULL,
  lease_owner      VARCHAR(128)  NULL,
  lease_expires_at DATETIME      NULL,
  attempts         INT           NOT NULL DEFAULT 0,
  last_error       VARCHAR(512)  NULL,
  created_at       DATETIME      NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  updated_at       DATETIME      NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_operation_flow CHECK (flow IN ('LEGACY', 'APPROVE_FIRST')),
  CONSTRAINT ck_operation_version CHECK (version >= 1),
  CONSTRAINT ck_operation_attempts CHECK (attempts >= 0)
);
CREATE UNIQUE INDEX uk_operation_operation_id ON operation (operation_id);
CREATE INDEX idx_operation_due ON operation (due_at, id);
CREATE INDEX idx_operation_lease ON operation (lease_expires_at);
CREATE INDEX idx_operation_subject_created ON operation (subject, created_at, id);
CREATE INDEX idx_operation_step_updated ON operation (step_status, updated_at);
CREATE INDEX idx_operation_batch ON operation (batch_id);
CREATE INDEX idx_operation_mr ON operation (project_id, mr_iid);

-- MariaDB's ON UPDATE CURRENT_TIMESTAMP(6): an UPDATE that does not set
-- updated_at itself gets the DB clock. recursive_triggers is off, so the
-- trigger's own UPDATE does not fire it again.
-- +goose StatementBegin
CREATE TRIGGER trg_operation_updated_at AFTER UPDATE ON operation
FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
  UPDATE operation SET updated_at = strftime('%Y-%m-%d %H:%M:%f','now') WHERE id = NEW.id;
END;
-- +goose StatementEnd

CREATE TABLE operation_step (
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
CREATE INDEX idx_operation_step_operation ON operation_step (operation_id, id);

-- +goose Down
DROP TABLE operation_step;
DROP TABLE operation;
