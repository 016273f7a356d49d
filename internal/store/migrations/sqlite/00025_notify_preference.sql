-- A person's notification preferences. Same logical change as
-- migrations/mysql/00025, where each column is explained.

-- +goose Up
CREATE TABLE notify_preference (
  account    VARCHAR(128) NOT NULL,
  kind       VARCHAR(48)  NOT NULL,
  enabled    TINYINT      NOT NULL CHECK (enabled IN (0, 1)),
  updated_at DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  PRIMARY KEY (account, kind)
);

-- +goose Down
DROP TABLE notify_preference;
