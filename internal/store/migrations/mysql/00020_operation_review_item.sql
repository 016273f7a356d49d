-- The removal of an entry changeflow did not write (docs/reviews.md,
-- "Entries changeflow did not write"). Same logical change as
-- migrations/sqlite/00020.
--
-- operation.review_item_id: for a removal (kind REVOKE) that an access
-- review started for a repository entry — one no grant owns — the review
-- item whose revoke it carries out; NULL for every other operation. Its
-- unique key makes one removal per item, whoever races to start it; the
-- removal's grant_operation_id is the operationId the entry carries in
-- the file (maybe blank), the only entry it may remove. The column also
-- tells the access history to end the repo period of the entry when the
-- removal is confirmed, and the repository reader to leave that ending
-- to the confirmation.

-- +goose Up
ALTER TABLE operation ADD COLUMN review_item_id BIGINT NULL, ADD UNIQUE KEY uk_operation_review_item (review_item_id);

-- +goose Down
ALTER TABLE operation DROP KEY uk_operation_review_item, DROP COLUMN review_item_id;
