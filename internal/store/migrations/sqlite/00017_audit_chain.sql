-- The tamper-evident audit chain (docs/audit.md, docs/storage.md): every
-- step of every request, every approval decision received and every
-- audit_log record, copied once, in order, each hashed with the hash
-- before it. Same logical change as
-- migrations/mysql/00017.
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
-- reads the step history and the approval decisions received by time.

-- +goose Up
CREATE TABLE audit_chain (
  seq         BIGINT       NOT NULL PRIMARY KEY,
  source      VARCHAR(16)  NOT NULL,
  source_id   BIGINT       NOT NULL,
  kind        VARCHAR(64)  NOT NULL,
  occurred_at DATETIME     NOT NULL,
  record      TEXT         NOT NULL,
  prev_hash   CHAR(64)     NOT NULL,
  hash        CHAR(64)     NOT NULL,
  chained_at  DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_audit_chain_seq CHECK (seq >= 1)
);
CREATE UNIQUE INDEX uk_audit_chain_source ON audit_chain (source, source_id);
CREATE INDEX idx_audit_chain_occurred ON audit_chain (occurred_at, seq);

CREATE TABLE audit_chain_head (
  id         INT          NOT NULL PRIMARY KEY,
  seq        BIGINT       NOT NULL,
  hash       CHAR(64)     NOT NULL,
  chained_to DATETIME     NULL,
  updated_at DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_audit_chain_head_one CHECK (id = 1)
);
INSERT INTO audit_chain_head (id, seq, hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

CREATE TABLE audit_chain_anchor (
  id          INT          NOT NULL PRIMARY KEY,
  seq         BIGINT       NOT NULL,
  hash        CHAR(64)     NOT NULL,
  occurred_at DATETIME     NULL,
  moved_at    DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  CONSTRAINT ck_audit_chain_anchor_one CHECK (id = 1)
);
INSERT INTO audit_chain_anchor (id, seq, hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

CREATE INDEX idx_operation_step_created ON operation_step (created_at, id);
CREATE INDEX idx_approval_callback_received ON approval_callback (received_at, id);

-- +goose Down
DROP INDEX idx_approval_callback_received;
DROP INDEX idx_operation_step_created;
DROP TABLE audit_chain_anchor;
DROP TABLE audit_chain_head;
DROP TABLE audit_chain;
