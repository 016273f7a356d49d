-- The tamper-evident audit chain (docs/audit.md, docs/storage.md): every
-- step of every request, every approval decision received and every
-- audit_log record, copied once, in order, each hashed with the hash
-- before it.
--
-- audit_chain: one row per chained record; seq is the position (1, 2, …
-- without gaps, from the anchor on), (source, source_id) the record it
-- copies, so a record is chained once however many instances chain.
-- audit_chain_head: one row, the last seq and hash; every chaining
-- transaction moves it with a guarded write (WHERE seq = the seq it read),
-- so of two instances chaining at once exactly one wins. chained_to is the
-- newest occurred_at chained (where the next look for new records starts,
-- less a lookback). audit_chain_anchor: one row, the last record
-- retention removed, whose hash the first remaining record's prev_hash is.
-- idx_operation_step_created, idx_approval_callback_received: the chainer
-- reads the step history and the approval decisions received by time;
-- adding an index is an online ALTER on MariaDB 10.3+ (no table copy).

-- +goose Up
CREATE TABLE audit_chain (
  seq         BIGINT       NOT NULL,
  source      VARCHAR(16)  NOT NULL,
  source_id   BIGINT       NOT NULL,
  kind        VARCHAR(64)  NOT NULL,
  occurred_at DATETIME(6)  NOT NULL,
  record      MEDIUMTEXT   NOT NULL,
  prev_hash   CHAR(64)     NOT NULL,
  hash        CHAR(64)     NOT NULL,
  chained_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (seq),
  UNIQUE KEY uk_audit_chain_source (source, source_id),
  KEY idx_audit_chain_occurred (occurred_at, seq),
  CONSTRAINT ck_audit_chain_seq CHECK (seq >= 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE audit_chain_head (
  id         INT          NOT NULL,
  seq        BIGINT       NOT NULL,
  hash       CHAR(64)     NOT NULL,
  chained_to DATETIME(6)  NULL,
  updated_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  CONSTRAINT ck_audit_chain_head_one CHECK (id = 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT INTO audit_chain_head (id, seq, hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

CREATE TABLE audit_chain_anchor (
  id          INT          NOT NULL,
  seq         BIGINT       NOT NULL,
  hash        CHAR(64)     NOT NULL,
  occurred_at DATETIME(6)  NULL,
  moved_at    DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  CONSTRAINT ck_audit_chain_anchor_one CHECK (id = 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT INTO audit_chain_anchor (id, seq, hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

ALTER TABLE operation_step ADD KEY idx_operation_step_created (created_at, id);
ALTER TABLE approval_callback ADD KEY idx_approval_callback_received (received_at, id);

-- +goose Down
ALTER TABLE approval_callback DROP KEY idx_approval_callback_received;
ALTER TABLE operation_step DROP KEY idx_operation_step_created;
DROP TABLE audit_chain_anchor;
DROP TABLE audit_chain_head;
DROP TABLE audit_chain;
