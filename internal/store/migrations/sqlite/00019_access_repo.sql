-- The repository part of the access history (docs/storage.md,
-- "access_repo_cursor"). Same logical change as migrations/mysql/00019;
-- SQLite differences: times are TEXT, and ADD COLUMN goes last.

-- +goose Up
CREATE TABLE access_repo_cursor (
  target_key VARCHAR(128) NOT NULL,
  file_path  VARCHAR(512) NOT NULL,
  last_sha   VARCHAR(64)  NOT NULL,
  last_at    DATETIME     NOT NULL,
  updated_at DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  PRIMARY KEY (target_key, file_path)
);

ALTER TABLE access_interval ADD COLUMN end_sha VARCHAR(64) NULL;

-- +goose Down
ALTER TABLE access_interval DROP COLUMN end_sha;
DROP TABLE access_repo_cursor;
