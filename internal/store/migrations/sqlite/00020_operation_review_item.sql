-- The removal of an entry changeflow did not write (docs/reviews.md,
-- "Entries changeflow did not write"). Same logical change as
-- migrations/mysql/00020; SQLite differences: ADD COLUMN goes last, the
-- index is a separate statement.

-- +goose Up
ALTER TABLE operation ADD COLUMN review_item_id BIGINT NULL;
CREATE UNIQUE INDEX uk_operation_review_item ON operation (review_item_id);

-- +goose Down
DROP INDEX uk_operation_review_item;
ALTER TABLE operation DROP COLUMN review_item_id;
