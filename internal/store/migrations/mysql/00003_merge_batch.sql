-- Batches (I1 single active slot per project), the waiting set (I2, I3, I4)
-- and the append-only membership history.

-- +goose Up
CREATE TABLE merge_batch (
  id              BIGINT       NOT NULL AUTO_INCREMENT,
  project_id      BIGINT       NOT NULL,
  -- 1=RUNNING 2=SUCCEEDED 3=FAILED 4=BLOCKED
  status          TINYINT      NOT NULL DEFAULT 1,
  -- The project while the batch is active (RUNNING or BLOCKED), else NULL.
  -- A unique index allows many NULLs, so uk_merge_batch_active_slot admits
  -- at most one active batch per project and any number of finished ones;
  -- the terminal UPDATE of status frees the slot by itself.
  active_slot     BIGINT GENERATED ALWAYS AS (CASE WHEN status IN (1, 4) THEN project_id ELSE NULL END) STORED,
  mr_iid          BIGINT       NULL,
  mr_url          VARCHAR(512) NULL,
  branch          VARCHAR(255) NULL,
  split_depth     INT          NOT NULL DEFAULT 0,
  parent_batch_id BIGINT       NULL,
  version         BIGINT       NOT NULL DEFAULT 1,
  failure_code    VARCHAR(64)  NULL,
  failure_message VARCHAR(512) NULL,
  created_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_merge_batch_active_slot (active_slot),
  KEY idx_merge_batch_status_created (status, created_at, id),
  KEY idx_merge_batch_mr (project_id, mr_iid),
  CONSTRAINT ck_merge_batch_status CHECK (status IN (1, 2, 3, 4)),
  CONSTRAINT ck_merge_batch_version CHECK (version >= 1),
  CONSTRAINT ck_merge_batch_split_depth CHECK (split_depth >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE merge_batch_request (
  id           BIGINT      NOT NULL AUTO_INCREMENT,
  operation_id VARCHAR(64) NOT NULL,
  project_id   BIGINT      NOT NULL,
  -- NULL while waiting; set by the claim's guarded UPDATE.
  batch_id     BIGINT      NULL,
  split_group  BIGINT      NULL,
  split_depth  INT         NOT NULL DEFAULT 0,
  created_at   DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_merge_batch_request_operation (operation_id),
  KEY idx_merge_batch_request_waiting (project_id, batch_id, created_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE merge_batch_history (
  id           BIGINT      NOT NULL AUTO_INCREMENT,
  batch_id     BIGINT      NOT NULL,
  operation_id VARCHAR(64) NOT NULL,
  created_at   DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  KEY idx_merge_batch_history_batch (batch_id),
  KEY idx_merge_batch_history_operation (operation_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE merge_batch_history;
DROP TABLE merge_batch_request;
DROP TABLE merge_batch;
