-- Dedupe and bookkeeping records: idempotency, audit, callback and webhook
-- deliveries, instance heartbeats.

-- +goose Up
CREATE TABLE idempotency_record (
  id              BIGINT       NOT NULL AUTO_INCREMENT,
  idem_key        VARCHAR(128) NOT NULL,
  subject         VARCHAR(128) NOT NULL,
  request_hash    CHAR(64)     NOT NULL,
  operation_id    VARCHAR(64)  NOT NULL,
  state           VARCHAR(16)  NOT NULL DEFAULT 'IN_FLIGHT',
  response_status INT          NULL,
  response_body   TEXT         NULL,
  created_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  expires_at      DATETIME(6)  NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_idempotency_record_key (idem_key),
  KEY idx_idempotency_record_expires (expires_at),
  CONSTRAINT ck_idempotency_record_state CHECK (state IN ('IN_FLIGHT', 'DONE'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE audit_log (
  id         BIGINT       NOT NULL AUTO_INCREMENT,
  audit_key  VARCHAR(128) NOT NULL,
  actor      VARCHAR(128) NOT NULL,
  action     VARCHAR(64)  NOT NULL,
  resource   VARCHAR(255) NOT NULL DEFAULT '',
  params     TEXT         NULL,
  outcome    VARCHAR(32)  NOT NULL,
  created_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_audit_log_key (audit_key),
  KEY idx_audit_log_created (created_at),
  KEY idx_audit_log_resource (resource, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE approval_callback (
  id           BIGINT       NOT NULL AUTO_INCREMENT,
  delivery_key VARCHAR(128) NOT NULL,
  operation_id VARCHAR(64)  NOT NULL,
  approval_id  VARCHAR(128) NOT NULL DEFAULT '',
  result       VARCHAR(16)  NOT NULL,
  received_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_approval_callback_delivery (delivery_key),
  KEY idx_approval_callback_operation (operation_id),
  CONSTRAINT ck_approval_callback_result CHECK (result IN ('APPROVED', 'REJECTED', 'WITHDRAWN'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE deploy_callback (
  id           BIGINT       NOT NULL AUTO_INCREMENT,
  delivery_key VARCHAR(128) NULL,
  project_id   BIGINT       NOT NULL,
  mr_iid       BIGINT       NOT NULL,
  status       VARCHAR(32)  NOT NULL,
  received_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_deploy_callback_delivery (delivery_key),
  KEY idx_deploy_callback_mr (project_id, mr_iid)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE gitlab_event (
  id          BIGINT      NOT NULL AUTO_INCREMENT,
  event_uuid  VARCHAR(64) NOT NULL,
  kind        VARCHAR(32) NOT NULL,
  received_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_gitlab_event_uuid (event_uuid),
  KEY idx_gitlab_event_received (received_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE instance_heartbeat (
  instance_id  VARCHAR(128) NOT NULL,
  started_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  heartbeat_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (instance_id),
  KEY idx_instance_heartbeat_at (heartbeat_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE instance_heartbeat;
DROP TABLE gitlab_event;
DROP TABLE deploy_callback;
DROP TABLE approval_callback;
DROP TABLE audit_log;
DROP TABLE idempotency_record;
