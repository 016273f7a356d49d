-- Requests (one row per operationId) and their step history.
-- docs/storage.md explains every column group and index.

-- +goose Up
CREATE TABLE operation (
  id               BIGINT        NOT NULL AUTO_INCREMENT,
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
  expires_at       DATETIME(6)   NULL,
  request_hash     CHAR(64)      NOT NULL DEFAULT '',
  next_action      VARCHAR(64)   NULL,
  due_at           DATETIME(6)   NULL,
  lease_owner      VARCHAR(128)  NULL,
  lease_expires_at DATETIME(6)   NULL,
  attempts         INT           NOT NULL DEFAULT 0,
  last_error       VARCHAR(512)  NULL,
  created_at       DATETIME(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at       DATETIME(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_operation_operation_id (operation_id),
  KEY idx_operation_due (due_at, id),
  KEY idx_operation_lease (lease_expires_at),
  KEY idx_operation_subject_created (subject, created_at, id),
  KEY idx_operation_step_updated (step_status, updated_at),
  KEY idx_operation_batch (batch_id),
  KEY idx_operation_mr (project_id, mr_iid),
  CONSTRAINT ck_operation_flow CHECK (flow IN ('LEGACY', 'APPROVE_FIRST')),
  CONSTRAINT ck_operation_version CHECK (version >= 1),
  CONSTRAINT ck_operation_attempts CHECK (attempts >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE operation_step (
  id                  BIGINT       NOT NULL AUTO_INCREMENT,
  operation_id        VARCHAR(64)  NOT NULL,
  from_step           INT          NULL,
  to_step             INT          NOT NULL,
  from_binding_status VARCHAR(32)  NULL,
  to_binding_status   VARCHAR(32)  NULL,
  actor               VARCHAR(128) NOT NULL DEFAULT '',
  note                VARCHAR(512) NOT NULL DEFAULT '',
  created_at          DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  KEY idx_operation_step_operation (operation_id, id),
  CONSTRAINT ck_operation_step_from_status CHECK (from_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED')),
  CONSTRAINT ck_operation_step_to_status CHECK (to_binding_status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE operation_step;
DROP TABLE operation;
