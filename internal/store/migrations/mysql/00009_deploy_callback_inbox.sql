-- Deploy callbacks get an inbox like approval callbacks (issue 13): what
-- became of each (RECORDED until the workflow classified it; APPLIED,
-- DUPLICATE, EARLY, UNKNOWN_MR, NOT_MERGED, IGNORED), why, and how many
-- deliveries of the same key followed. Adding columns with constant
-- defaults is an instant ALTER on MariaDB 10.3+ (no table copy); the index
-- is built online. Existing rows stay RECORDED: they are shown as not
-- classified, and the reconciliation's comparisons check each callback
-- against the MRs changeflow merged at read time, so nothing depends on a
-- backfill.

-- +goose Up
ALTER TABLE deploy_callback
  ADD COLUMN disposition VARCHAR(24) NOT NULL DEFAULT 'RECORDED',
  ADD COLUMN reason VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN duplicates INT NOT NULL DEFAULT 0;
CREATE INDEX idx_deploy_callback_received ON deploy_callback (received_at);

-- +goose Down
DROP INDEX idx_deploy_callback_received ON deploy_callback;
ALTER TABLE deploy_callback
  DROP COLUMN duplicates,
  DROP COLUMN reason,
  DROP COLUMN disposition;
