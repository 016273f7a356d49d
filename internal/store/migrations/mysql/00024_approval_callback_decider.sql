-- The callback inbox keeps who decided and their comment, as the approval
-- system reports them (the callback's optional decidedBy and comment, or
-- the read of a polled decision), so the audit export names the approver
-- of each decision and not only the approval's id, and a replay of the
-- delivery keeps both. NULL: none reported, or recorded before these
-- columns.
-- A nullable column without a default is an instant ALTER on MariaDB.

-- +goose Up
ALTER TABLE approval_callback ADD COLUMN decided_by VARCHAR(128) NULL, ADD COLUMN comment VARCHAR(512) NULL;

-- +goose Down
ALTER TABLE approval_callback DROP COLUMN decided_by, DROP COLUMN comment;
