-- A person's notification preferences (docs/notifications.md,
-- "Preferences"): one row per account and kind the person chose; a kind
-- without a row is on. enabled is 0 or 1. The primary key makes a choice
-- exist once however many instances write it (an upsert replaces it).

-- +goose Up
CREATE TABLE notify_preference (
  account    VARCHAR(128) NOT NULL,
  kind       VARCHAR(48)  NOT NULL,
  enabled    TINYINT      NOT NULL,
  updated_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (account, kind),
  CONSTRAINT ck_notify_preference_enabled CHECK (enabled IN (0, 1))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE notify_preference;
