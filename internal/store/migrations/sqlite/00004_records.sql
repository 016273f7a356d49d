-- Dedupe and bookkeeping records: idempotency, audit, callback and webhook
-- deliveries, instance heartbeats.

-- +goose Up
CREATE TABLE idempotency_record (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  idem_key        VARCHAR(128) NOT NULL,
  subject         VARCHAR(128) NOT NULL,
  request_hash    CHAR(64)     NOT NULL,
  operation_id    VARCHAR(64)  NOT NULL,
  state           VARCHAR(16)  NOT NULL DEFAULT 'IN_FLIGHT',
  response_status INT          NULL,
  response_body   TEXT         NULL,
  created_at      DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  expires_at      DATETIME     NOT NULL,
  CONSTRAINT ck_idempotency_record_state CHECK (state IN ('IN_FLIGHT', 'DONE'))
);
CREATE UNIQUE INDEX uk_idempotency_record_key ON idempotency_record (idem_key);
CREATE INDEX idx_idempotency_record_expires ON idempotency_record (expires_at);

CREATE TABLE audit_log (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  audit_key  VARCHAR(128) NOT NULL,
  actor      VARCHAR(128) NOT NULL,
  action     VARCHAR(64)  NOT NULL,
  resource   VARCHAR(255) NOT NULL DEFAULT '',
  params     TEXT         NULL,
  outcome    VARCHAR(32)  NOT NULL,
  created_at DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now'))
);
CREATE UNIQUE INDEX uk_audit_log_key ON audit_log (audit_key);
CREATE INDEX idx_audit_log_created ON audit_log (created_at);
CREATE INDEX idx_audit_log_resource ON audit_log (resource, id);

CREATE TABLE approval_callback (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  delivery_key VARCHAR(128) NOT NULL,
  operation_id VARCHAR(64)  NOT NULL,
  approval_id  VARCHAR(128) NOT NULL DEFAULT '',
  result       VARCHAR(16)  NOT NULL,
  received_at  DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_approval_callback_result CHECK (result IN ('APPROVED', 'REJECTED', 'WITHDRAWN'))
);
CREATE UNIQUE INDEX uk_approval_callback_delivery ON approval_callback (delivery_key);
CREATE INDEX idx_approval_callback_operation ON approval_callback (operation_id);

CREATE TABLE deploy_callback (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  delivery_key VARCHAR(128) NULL,
  project_id   BIGINT       NOT NULL,
  mr_iid       BIGINT       NOT NULL,
  status       VARCHAR(32)  NOT NULL,
  received_at  DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now'))
);
CREATE UNIQUE INDEX uk_deploy_callback_delivery ON deploy_callback (delivery_key);
CREATE INDEX idx_deploy_callback_mr ON deploy_callback (project_id, mr_iid);

CREATE TABLE gitlab_event (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  event_uuid  VARCHAR(64) NOT NULL,
  kind        VARCHAR(32) NOT NULL,
  received_at DATETIME    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now'))
);
CREATE UNIQUE INDEX uk_gitlab_event_uuid ON gitlab_event (event_uuid);
CREATE INDEX idx_gitlab_event_received ON gitlab_event (received_at);

CREATE TABLE instance_heartbeat (
  instance_id  VARCHAR(128) NOT NULL PRIMARY KEY,
  started_at   DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  heartbeat_at DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now'))
);
CREATE INDEX idx_instance_heartbeat_at ON instance_heartbeat (heartbeat_at);

-- +goose Down
DROP TABLE instance_heartbeat;
DROP TABLE gitlab_event;
DROP TABLE deploy_callback;
DROP TABLE approval_callback;
DROP TABLE audit_log;
DROP TABLE idempotency_record;
