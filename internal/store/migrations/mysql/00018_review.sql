-- Access reviews (docs/reviews.md): a campaign per target and one item per
-- entry in effect when it opened.
--
-- review_campaign.open_target is the target's key while the campaign is
-- open and NULL once it closed: its unique key allows one open campaign
-- per target (a second is 409). scheduled_after is, for a campaign the
-- schedule (targets.<key>.review.every) opened, the id of the campaign
-- of the target before it (0 when there was none), NULL for one an
-- operator opened: its unique key with target_key makes "the campaign
-- after campaign N" exist once, however many instances race to open it.
--
-- review_item.grant_operation_id is the changeflow grant the item reviews;
-- NULL is kept for an entry changeflow did not write (read from the
-- repository's history). decision is NULL until decided (a guarded write
-- decides it once); by_default says the campaign's default decided it at
-- the due date. revocation_operation_id is the removal a revoke started;
-- revoke_note says why none was started (the access had already ended).

-- +goose Up
CREATE TABLE review_campaign (
  id               BIGINT       NOT NULL AUTO_INCREMENT,
  target_key       VARCHAR(128) NOT NULL,
  opened_at        DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  due_at           DATETIME(6)  NOT NULL,
  default_decision VARCHAR(8)   NOT NULL,
  opened_by        VARCHAR(128) NOT NULL,
  status           VARCHAR(8)   NOT NULL DEFAULT 'open',
  closed_at        DATETIME(6)  NULL,
  open_target      VARCHAR(128) NULL,
  scheduled_after  BIGINT       NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_review_campaign_open (open_target),
  UNIQUE KEY uk_review_campaign_schedule (target_key, scheduled_after),
  KEY idx_review_campaign_target (target_key, id),
  KEY idx_review_campaign_due (status, due_at),
  CONSTRAINT ck_review_campaign_default CHECK (default_decision IN ('keep', 'revoke')),
  CONSTRAINT ck_review_campaign_status CHECK (status IN ('open', 'closed')),
  CONSTRAINT ck_review_campaign_open CHECK ((status = 'open') = (open_target IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE review_item (
  id                      BIGINT        NOT NULL AUTO_INCREMENT,
  campaign_id             BIGINT        NOT NULL,
  subject                 VARCHAR(128)  NOT NULL,
  grant_operation_id      VARCHAR(64)   NULL,
  approval_id             VARCHAR(128)  NULL,
  granted_from            DATETIME(6)   NULL,
  expires_at              DATETIME(6)   NULL,
  decision                VARCHAR(8)    NULL,
  decided_by              VARCHAR(128)  NULL,
  decided_at              DATETIME(6)   NULL,
  comment                 VARCHAR(1024) NOT NULL DEFAULT '',
  by_default              TINYINT       NOT NULL DEFAULT 0,
  revocation_operation_id VARCHAR(64)   NULL,
  revoke_note             VARCHAR(512)  NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_review_item_subject (campaign_id, subject),
  KEY idx_review_item_revoke (decision, revocation_operation_id),
  CONSTRAINT fk_review_item_campaign FOREIGN KEY (campaign_id) REFERENCES review_campaign (id),
  CONSTRAINT ck_review_item_decision CHECK (decision IS NULL OR decision IN ('keep', 'revoke'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE review_item;
DROP TABLE review_campaign;
