-- Access history (docs/storage.md, "access_interval"): one row per period
-- in which a subject had access to a target — an entry in the target's
-- binding file on the default branch, from the moment its change was in
-- effect (the deploy confirmation: the binding reaching VALIDATED) until
-- its removal was in effect. Half-open: [from_at, until_at); until_at NULL
-- while the access lasts.
--
-- The store writes the rows in the transaction of the binding move that
-- puts the change in effect (store.accessRecord, called by the step
-- history's one insert), so a row exists exactly when the move committed.
--
-- until_key is until_at with the open end as the largest DATETIME, so that
-- "had access at T" (until > T AND from <= T) is one range of
-- idx_access_interval_target or _subject; open_slot is 1 while the row is
-- open and NULL once closed, so uk_access_interval_open admits at most one
-- open period per (target, subject, source) — a unique index allows many
-- NULLs, as merge_batch.active_slot does for batches.
--
-- Backfill: the periods before this migration are rebuilt from the step
-- history (operation_step), one statement: every move that put a grant or
-- renewal in effect opens a period, which the next such move or removal of
-- the same (subject, target) closes. merge_sha was never stored: NULL.

-- +goose Up
CREATE TABLE access_interval (
  id               BIGINT       NOT NULL AUTO_INCREMENT,
  subject          VARCHAR(128) NOT NULL,
  target_key       VARCHAR(128) NOT NULL,
  from_at          DATETIME(6)  NOT NULL,
  until_at         DATETIME(6)  NULL,
  source           VARCHAR(16)  NOT NULL,
  operation_id     VARCHAR(64)  NULL,
  approval_id      VARCHAR(128) NULL,
  mr_iid           BIGINT       NULL,
  merge_sha        VARCHAR(64)  NULL,
  end_operation_id VARCHAR(64)  NULL,
  created_at       DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  until_key        DATETIME(6)  GENERATED ALWAYS AS (COALESCE(until_at, TIMESTAMP'9999-12-31 23:59:59.999999')) STORED,
  open_slot        TINYINT      GENERATED ALWAYS AS (CASE WHEN until_at IS NULL THEN 1 ELSE NULL END) STORED,
  PRIMARY KEY (id),
  UNIQUE KEY uk_access_interval_open (target_key, subject, source, open_slot),
  KEY idx_access_interval_target (target_key, until_key, from_at),
  KEY idx_access_interval_subject (subject, until_key, from_at),
  KEY idx_access_interval_operation (operation_id),
  CONSTRAINT ck_access_interval_source CHECK (source IN ('changeflow', 'repo')),
  CONSTRAINT ck_access_interval_operation CHECK (source <> 'changeflow' OR operation_id IS NOT NULL),
  CONSTRAINT ck_access_interval_order CHECK (until_at IS NULL OR until_at >= from_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

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
