-- Access reviews (docs/reviews.md): a campaign per target and one item per
-- entry in effect when it opened. Same logical change as
-- migrations/mysql/00018, where each column is explained.

-- +goose Up
CREATE TABLE review_campaign (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  target_key       VARCHAR(128) NOT NULL,
  opened_at        DATETIME     NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f','now')),
  due_at           DATETIME     NOT NULL,
  default_decision VARCHAR(8)   NOT NULL,
  opened_by        VARCHAR(128) NOT NULL,
  status           VARCHAR(8)   NOT NULL DEFAULT 'open',
  closed_at        DATETIME     NULL,
  open_target      VARCHAR(128) NULL,
  scheduled_after  BIGINT       NULL,
  CONSTRAINT ck_review_campaign_default CHECK (default_decision IN ('keep', 'revoke')),
  CONSTRAINT ck_review_campaign_status CHECK (status IN ('open', 'closed')),
  CONSTRAINT ck_review_campaign_open CHECK ((status = 'open') = (open_target IS NOT NULL))
);
CREATE UNIQUE INDEX uk_review_campaign_open ON review_campaign (open_target);
CREATE UNIQUE INDEX uk_review_campaign_schedule ON review_campaign (target_key, scheduled_after);
CREATE INDEX idx_review_campaign_target ON review_campaign (target_key, id);
CREATE INDEX idx_review_campaign_due ON review_campaign (status, due_at);

CREATE TABLE review_item (
  id                      INTEGER PRIMARY KEY AUTOINCREMENT,
  campaign_id             BIGINT        NOT NULL REFERENCES review_campaign (id),
  subject                 VARCHAR(128)  NOT NULL,
  grant_operation_id      VARCHAR(64)   NULL,
  approval_id             VARCHAR(128)  NULL,
  granted_from            DATETIME      NULL,
  expires_at              DATETIME      NULL,
  decision                VARCHAR(8)    NULL CHECK (decision IS NULL OR decision IN ('keep', 'revoke')),
  decided_by              VARCHAR(128)  NULL,
  decided_at              DATETIME      NULL,
  comment                 VARCHAR(1024) NOT NULL DEFAULT '',
  by_default              TINYINT       NOT NULL DEFAULT 0,
  revocation_operation_id VARCHAR(64)   NULL,
  revoke_note             VARCHAR(512)  NULL
);
CREATE UNIQUE INDEX uk_review_item_subject ON review_item (campaign_id, subject);
CREATE INDEX idx_review_item_revoke ON review_item (decision, revocation_operation_id);

-- +goose Down
DROP TABLE review_item;
DROP TABLE review_campaign;
