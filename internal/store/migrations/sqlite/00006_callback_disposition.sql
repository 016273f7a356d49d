-- The callback inbox keeps what became of each approval decision it
-- recorded (issue 6): the disposition the workflow gave it (RECORDED until
-- it acted; APPLIED, STALE, UNKNOWN_OPERATION, REJECTED_BY_GUARD), why, how
-- many duplicate deliveries followed, and whether it came as a callback or
-- was found by polling the approval system. Existing rows stay RECORDED.

-- +goose Up
ALTER TABLE approval_callback ADD COLUMN source VARCHAR(16) NOT NULL DEFAULT 'callback';
ALTER TABLE approval_callback ADD COLUMN disposition VARCHAR(24) NOT NULL DEFAULT 'RECORDED';
ALTER TABLE approval_callback ADD COLUMN reason VARCHAR(255) NOT NULL DEFAULT '';
ALTER TABLE approval_callback ADD COLUMN duplicates INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE approval_callback DROP COLUMN duplicates;
ALTER TABLE approval_callback DROP COLUMN reason;
ALTER TABLE approval_callback DROP COLUMN disposition;
ALTER TABLE approval_callback DROP COLUMN source;
