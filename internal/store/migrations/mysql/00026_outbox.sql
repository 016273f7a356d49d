-- The transactional outbox of notifications (docs/notifications.md,
-- "Delivery"). Same logical change as migrations/sqlite/00026.
--
-- outbox_event: one row per event. The transaction that records a
-- notable change (a step-history row, a batch blocking, a review
-- opening) inserts its event, so no change commits without its event and
-- no event outlives a rollback. event_id is the CloudEvents id, the same
-- on every retry. dedupe_key, when set, makes an event exist once however
-- many instances try to write it (an expiry reminder:
-- "expiring:<operationId>:<threshold>"). order_key groups the events
-- delivered one after another (a request's operationId, "batch:<id>",
-- "review:<id>"): an event is claimed only once no earlier PENDING event
-- of its key is left. data is the JSON of what the event tells, as known
-- when it was written.
--
-- Delivery state: status PENDING → DONE (every channel took it or had
-- nobody for it) or DEAD (notify.maxAttempts attempts failed; an operator
-- replays it). attempts counts claims; next_at is when it may be claimed
-- again (the backoff); lease_owner and lease_until are the claim of one
-- instance, as the engine's leases are: an instance that dies mid-delivery
-- leaves a lease that runs out, and another instance delivers the event
-- again with the same event_id.
--
-- outbox_delivery: the channels that took an event (DELIVERED), had
-- nobody for it (SKIPPED) or are gone (GONE), one row per event and
-- channel, so a retry after one channel failed does not repeat the others.
--
-- outbox_channel: a channel whose destination said it is gone (an HTTP
-- 410), disabled until an operator turns it back on.

-- +goose Up
CREATE TABLE outbox_event (
  id           BIGINT       NOT NULL AUTO_INCREMENT,
  event_id     VARCHAR(64)  NOT NULL,
  dedupe_key   VARCHAR(191) NULL,
  kind         VARCHAR(48)  NOT NULL,
  order_key    VARCHAR(128) NOT NULL,
  operation_id VARCHAR(64)  NULL,
  data         TEXT         NOT NULL,
  status       VARCHAR(16)  NOT NULL DEFAULT 'PENDING',
  attempts     INT          NOT NULL DEFAULT 0,
  next_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  lease_owner  VARCHAR(128) NULL,
  lease_until  DATETIME(6)  NULL,
  last_error   VARCHAR(512) NULL,
  created_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  done_at      DATETIME(6)  NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_outbox_event_event_id (event_id),
  UNIQUE KEY uk_outbox_event_dedupe (dedupe_key),
  KEY idx_outbox_event_due (status, next_at, id),
  KEY idx_outbox_event_order (order_key, status, id),
  KEY idx_outbox_event_operation (operation_id, id),
  CONSTRAINT ck_outbox_event_status CHECK (status IN ('PENDING', 'DONE', 'DEAD'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE outbox_delivery (
  event_row    BIGINT       NOT NULL,
  channel      VARCHAR(96)  NOT NULL,
  outcome      VARCHAR(16)  NOT NULL,
  delivered_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (event_row, channel),
  CONSTRAINT ck_outbox_delivery_outcome CHECK (outcome IN ('DELIVERED', 'SKIPPED', 'GONE'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE outbox_channel (
  channel     VARCHAR(96)  NOT NULL,
  disabled_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  reason      VARCHAR(512) NOT NULL DEFAULT '',
  PRIMARY KEY (channel)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE outbox_channel;
DROP TABLE outbox_delivery;
DROP TABLE outbox_event;
