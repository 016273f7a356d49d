-- Deploy callbacks get an inbox like approval callbacks (issue 13): what
-- became of each (RECORDED until the workflow classified it; APPLIED,
-- DUPLICATE, EARLY, UNKNOWN_MR, NOT_MERGED, IGNORED), why, and how many
-- deliveries of the same key followed. Existing rows stay RECORDED: the
-- reconciliation's comparisons check each callback against the MRs
-- changeflow merged at read time, so nothing depends on a backfill.

-- +goose Up
ALTER TABLE deploy_callback ADD COLUMN disposition VARCHAR(24) NOT NULL DEFAULT 'RECORDED';
ALTER TABLE deploy_callback ADD COLUMN reason VARCHAR(255) NOT NULL DEFAULT '';
ALTER TABLE deploy_callback ADD COLUMN duplicates INTEGER NOT NULL DEFAULT 0;
CREATE INDEX idx_deploy_callback_received ON deploy_callback (received_at);

-- +goose Down
DROP INDEX idx_deploy_callback_received;
ALTER TABLE deploy_callback DROP COLUMN duplicates;
ALTER TABLE deploy_callback DROP COLUMN reason;
ALTER TABLE deploy_callback DROP COLUMN disposition;
