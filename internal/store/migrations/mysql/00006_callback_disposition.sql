-- The callback inbox keeps what became of each approval decision it
-- recorded (issue 6): the disposition the workflow gave it (RECORDED until
-- it acted; APPLIED, STALE, UNKNOWN_OPERATION, REJECTED_BY_GUARD), why, how
-- many duplicate deliveries followed, and whether it came as a callback or
-- was found by polling the approval system. Existing rows stay RECORDED.
-- Adding columns with constant defaults is an instant ALTER on MariaDB
-- 10.3+ (no table copy).

-- +goose Up
ALTER TABLE approval_callback
  ADD COLUMN source VARCHAR(16) NOT NULL DEFAULT 'callback',
  ADD COLUMN disposition VARCHAR(24) NOT NULL DEFAULT 'RECORDED',
  ADD COLUMN reason VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN duplicates INT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE approval_callback
  DROP COLUMN duplicates,
  DROP COLUMN reason,
  DROP COLUMN disposition,
  DROP COLUMN source;
