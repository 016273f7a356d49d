-- The repository part of the access history (docs/storage.md,
-- "access_repo_cursor"). Same logical change as migrations/sqlite/00019.
--
-- access_repo_cursor: one row per (target, binding file), the last commit
-- of the file's history on the default branch the periodic reader has
-- applied (last_sha, committed at last_at). Every pass moves it with a
-- guarded write (WHERE last_sha = the sha it read), in the transaction
-- that writes the pass's periods, so of two instances reading the same
-- commits exactly one applies them.
--
-- access_interval.end_sha: the commit that removed the entry of a repo
-- period (merge_sha is the one that added it); NULL for changeflow's
-- periods and while open.

-- +goose Up
CREATE TABLE access_repo_cursor (
  target_key VARCHAR(128) NOT NULL,
  file_path  VARCHAR(512) NOT NULL,
  last_sha   VARCHAR(64)  NOT NULL,
  last_at    DATETIME(6)  NOT NULL,
  updated_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (target_key, file_path)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

ALTER TABLE access_interval ADD COLUMN end_sha VARCHAR(64) NULL AFTER end_operation_id;

-- +goose Down
ALTER TABLE access_interval DROP COLUMN end_sha;
DROP TABLE access_repo_cursor;
