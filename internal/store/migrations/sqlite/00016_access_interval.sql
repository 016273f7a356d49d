-- Access history (docs/storage.md, "access_interval"). Same logical table
-- as migrations/mysql/00016, and the same backfill from the step history;
-- SQLite differences: times are TEXT (the open end of until_key is
-- '9999-12-31 23:59:59.999', which sorts after every stored time), the
-- generated columns are declared in CREATE TABLE (ALTER TABLE cannot add
-- a STORED one), and indexes are separate statements.

-- +goose Up
CREATE TABLE access_interval (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  subject          VARCHAR(128) NOT NULL,
  target_key       VARCHAR(128) NOT NULL,
  from_at          DATETIME     NOT NULL,
  until_at         DATETIME     NULL,
  source           VARCHAR(16)  NOT NULL,
  operation_id     VARCHAR(64)  NULL,
  approval_id      VARCHAR(128) NULL,
  mr_iid           BIGINT       NULL,
  merge_sha        VARCHAR(64)  NULL,
  end_operation_id VARCHAR(64)  NULL,
  created_at       DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  until_key        TEXT         GENERATED ALWAYS AS (COALESCE(until_at, '9999-12-31 23:59:59.999')) STORED,
  open_slot        INT          GENERATED ALWAYS AS (CASE WHEN until_at IS NULL THEN 1 ELSE NULL END) STORED,
  CONSTRAINT ck_access_interval_source CHECK (source IN ('changeflow', 'repo')),
  CONSTRAINT ck_access_interval_operation CHECK (source <> 'changeflow' OR operation_id IS NOT NULL),
  CONSTRAINT ck_access_interval_order CHECK (until_at IS NULL OR until_at >= from_at)
);
CREATE UNIQUE INDEX uk_access_interval_open ON access_interval (target_key, subject, source, open_slot);
CREATE INDEX idx_access_interval_target ON access_interval (target_key, until_key, from_at);
CREATE INDEX idx_access_interval_subject ON access_interval (subject, until_key, from_at);
CREATE INDEX idx_access_interval_operation ON access_interval (operation_id);

INSERT INTO access_interval (subject, target_key, from_at, until_at, source, operation_id, approval_id, mr_iid, end_operation_id)
SELECT e.subject, e.target_key, e.at, e.next_at, 'changeflow', e.operation_id, e.approval_id, e.mr_iid, e.next_op
FROM (
  SELECT o.subject, o.target_key, s.created_at AS at, s.operation_id, o.approval_id,
    COALESCE(o.mr_iid, mb.mr_iid) AS mr_iid,
    CASE WHEN s.to_binding_status = 'VALIDATED' THEN 1 ELSE 0 END AS opens,
    LEAD(s.created_at) OVER (PARTITION BY o.subject, o.target_key ORDER BY s.created_at, s.id) AS next_at,
    LEAD(s.operation_id) OVER (PARTITION BY o.subject, o.target_key ORDER BY s.created_at, s.id) AS next_op
  FROM operation_step s
  JOIN operation o ON o.operation_id = s.operation_id
  LEFT JOIN merge_batch mb ON mb.id = o.batch_id
  WHERE (s.to_binding_status = 'VALIDATED' AND s.from_binding_status IN ('MERGED', 'RENEWING') AND s.to_step IN (10301, 10302))
     OR s.to_binding_status = 'REVOKED'
     OR (s.from_binding_status = 'VALIDATED' AND s.to_binding_status = 'CLOSED')
) e
WHERE e.opens = 1;

-- +goose Down
DROP TABLE access_interval;
