-- The merge commit of a request's MR (docs/storage.md, "operation",
-- "merge_batch" and "access_interval"). Same logical change as
-- migrations/sqlite/00021.
--
-- operation.merge_sha: the merge commit GitLab answered when the
-- operation's own MR (a single-request MR, or the batch MR on its
-- driver's row) was found merged; NULL until then and for requests that
-- never merged.
--
-- merge_batch.merge_sha: the batch MR's merge commit, written with the
-- members' move to MERGED, so every member's access period names it.
--
-- No backfill: rows merged before this migration keep NULL (their merge
-- commit is only in the step history's free-text note).

-- +goose Up
ALTER TABLE operation ADD COLUMN merge_sha VARCHAR(64) NULL AFTER approval_id;
ALTER TABLE merge_batch ADD COLUMN merge_sha VARCHAR(64) NULL AFTER mr_url;

-- +goose Down
ALTER TABLE merge_batch DROP COLUMN merge_sha;
ALTER TABLE operation DROP COLUMN merge_sha;
