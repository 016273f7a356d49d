-- Batches (I1 single active slot per project), the waiting set (I2, I3, I4)
-- and the append-only membership history.

-- +goose Up
CREATE TABLE merge_batch (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  project_id      BIGINT       NOT NULL,
  -- 1=RUNNING 2=SUCCEEDED 3=FAILED 4=BLOCKED
  status          TINYINT      NOT NULL DEFAULT 1,
  -- The same generated column as on MariaDB (rather than a partial unique
  -- index) so both dialects have the same columns and the same error on a
  -- direct write to it.
  active_slot     BIGINT GENERATED ALWAYS AS (CASE WHEN status IN (1, 4) THEN project_id ELSE NULL END) STORED,
  mr_iid          BIGINT       NULL,
  mr_url          VARCHAR(512) NULL,
  branch          VARCHAR(255) NULL,
  split_depth     INT          NOT NULL DEFAULT 0,
  parent_batch_id BIGINT       NULL,
  version         BIGINT       NOT NULL DEFAULT 1,
  failure_code    VARCHAR(64)  NULL,
  failure_message VARCHAR(512) NULL,
  created_at      DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  updated_at      DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_merge_batch_status CHECK (status IN (1, 2, 3, 4)),
  CONSTRAINT ck_merge_batch_version CHECK (version >= 1),
  CONSTRAINT ck_merge_batch_split_depth CHECK (split_depth >= 0)
);
CREATE UNIQUE INDEX uk_merge_batch_active_slot ON merge_batch (active_slot);
CREATE INDEX idx_merge_batch_status_created ON merge_batch (status, created_at, id);
CREATE INDEX idx_merge_batch_mr ON merge_batch (project_id, mr_iid);

-- +goose StatementBegin
CREATE TRIGGER trg_merge_batch_updated_at AFTER UPDATE ON merge_batch
FOR EACH ROW WHEN NEW.updated_at IS OLD.updated_at
BEGIN
  UPDATE merge_batch SET updated_at = strftime('%Y-%m-%d %H:%M:%f','now') WHERE id = NEW.id;
END;
-- +goose StatementEnd

CREATE TABLE merge_batch_request (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  operation_id VARCHAR(64) NOT NULL,
  project_id   BIGINT      NOT NULL,
  -- NULL while waiting, set by the claim's guarded UPDATE.
  batch_id     BIGINT      NULL,
  split_group  BIGINT      NULL,
  split_depth  INT         NOT NULL DEFAULT 0,
  created_at   DATETIME    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now'))
);
CREATE UNIQUE INDEX uk_merge_batch_request_operation ON merge_batch_request (operation_id);
CREATE INDEX idx_merge_batch_request_waiting ON merge_batch_request (project_id, batch_id, created_at, id);

CREATE TABLE merge_batch_history (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  batch_id     BIGINT      NOT NULL,
  operation_id VARCHAR(64) NOT NULL,
  created_at   DATETIME    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now'))
);
CREATE INDEX idx_merge_batch_history_batch ON merge_batch_history (batch_id);
CREATE INDEX idx_merge_batch_history_operation ON merge_batch_history (operation_id);

-- +goose Down
DROP TABLE merge_batch_history;
DROP TABLE merge_batch_request;
DROP TABLE merge_batch;
