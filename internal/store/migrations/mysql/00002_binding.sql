-- Current state per (subject, target) (I5) and its append-only history.

-- +goose Up
CREATE TABLE binding (
  id           BIGINT       NOT NULL AUTO_INCREMENT,
  subject_id   VARCHAR(128) NOT NULL,
  target_key   VARCHAR(128) NOT NULL,
  status       VARCHAR(32)  NOT NULL,
  operation_id VARCHAR(64)  NOT NULL,
  expires_at   DATETIME(6)  NULL,
  version      BIGINT       NOT NULL DEFAULT 1,
  created_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_binding_subject_target (subject_id, target_key),
  KEY idx_binding_operation (operation_id),
  KEY idx_binding_status_updated (status, updated_at),
  CONSTRAINT ck_binding_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED')),
  CONSTRAINT ck_binding_version CHECK (version >= 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE binding_history (
  id           BIGINT       NOT NULL AUTO_INCREMENT,
  subject_id   VARCHAR(128) NOT NULL,
  target_key   VARCHAR(128) NOT NULL,
  operation_id VARCHAR(64)  NOT NULL,
  status       VARCHAR(32)  NOT NULL,
  expires_at   DATETIME(6)  NULL,
  created_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  KEY idx_binding_history_relationship (subject_id, target_key, id),
  CONSTRAINT ck_binding_history_status CHECK (status IN (
    'APPROVAL_SENDING', 'APPROVAL_SENT', 'MR_CREATING', 'MR_CREATED', 'MERGING', 'MERGED',
    'VALIDATED', 'CREATE_FAILED', 'HANDLE_FAILED', 'REJECTED', 'CLOSED'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE binding_history;
DROP TABLE binding;
