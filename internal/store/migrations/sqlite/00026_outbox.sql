-- The transactional outbox of notifications. Same logical change as
-- migrations/mysql/00026, where each column is explained.

-- +goose Up
CREATE TABLE outbox_event (
  id           INTEGER      PRIMARY KEY AUTOINCREMENT,
  event_id     VARCHAR(64)  NOT NULL,
  dedupe_key   VARCHAR(191) NULL,
  kind         VARCHAR(48)  NOT NULL,
  order_key    VARCHAR(128) NOT NULL,
  operation_id VARCHAR(64)  NULL,
  data         TEXT         NOT NULL,
  status       VARCHAR(16)  NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DONE', 'DEAD')),
  attempts     INTEGER      NOT NULL DEFAULT 0,
  next_at      DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  lease_owner  VARCHAR(128) NULL,
  lease_until  DATETIME     NULL,
  last_error   VARCHAR(512) NULL,
  created_at   DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  done_at      DATETIME     NULL
);
CREATE UNIQUE INDEX uk_outbox_event_event_id ON outbox_event (event_id);
CREATE UNIQUE INDEX uk_outbox_event_dedupe ON outbox_event (dedupe_key);
CREATE INDEX idx_outbox_event_due ON outbox_event (status, next_at, id);
CREATE INDEX idx_outbox_event_order ON outbox_event (order_key, status, id);
CREATE INDEX idx_outbox_event_operation ON outbox_event (operation_id, id);

CREATE TABLE outbox_delivery (
  event_row    INTEGER     NOT NULL,
  channel      VARCHAR(96) NOT NULL,
  outcome      VARCHAR(16) NOT NULL CHECK (outcome IN ('DELIVERED', 'SKIPPED', 'GONE')),
  delivered_at DATETIME    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  PRIMARY KEY (event_row, channel)
);

CREATE TABLE outbox_channel (
  channel     VARCHAR(96)  NOT NULL PRIMARY KEY,
  disabled_at DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  reason      VARCHAR(512) NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE outbox_channel;
DROP TABLE outbox_delivery;
DROP TABLE outbox_event;
