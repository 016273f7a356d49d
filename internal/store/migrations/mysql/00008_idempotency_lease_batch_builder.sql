-- Idempotency keys are scoped per caller, and an IN_FLIGHT record has a
-- lease (docs/api.md, "Idempotency").
--
-- Scope: the unique key becomes (subject, idem_key), so another caller's
-- key is a fresh key for you and its use by someone else cannot be probed.
-- Lookups are by (subject, idem_key) and use the same index.
--
-- Lease: lease_until is when an IN_FLIGHT record whose request died (a
-- kill -9 between taking the key and storing the operation) may be taken
-- over by the next attempt, instead of answering 409 until the record
-- expires. Rows that are IN_FLIGHT when this runs get a lease that has
-- already ended (their created_at): they may have been stuck for hours.
--
-- merge_batch.builder: the instance whose round is building the batch's MR
-- (set at the claim, or when a round resumes the batch), '' once that
-- round has returned, NULL for batches claimed without one (before this
-- migration, or by a direct store claim). A RUNNING batch without an MR is
-- resumed by the next round at once when its builder has returned, is this
-- very instance, or no longer heartbeats; batch.resumeAfter is only for a
-- builder that is still alive and may still be building (docs/flows/batch.md).

-- +goose Up
ALTER TABLE idempotency_record
  ADD COLUMN lease_until DATETIME(6) NULL AFTER response_body,
  DROP INDEX uk_idempotency_record_key,
  ADD UNIQUE KEY uk_idempotency_record_key (subject, idem_key);
UPDATE idempotency_record SET lease_until = created_at WHERE lease_until IS NULL;
ALTER TABLE merge_batch ADD COLUMN builder VARCHAR(128) NULL AFTER parent_batch_id;

-- +goose Down
ALTER TABLE merge_batch DROP COLUMN builder;
ALTER TABLE idempotency_record
  DROP INDEX uk_idempotency_record_key,
  ADD UNIQUE KEY uk_idempotency_record_key (idem_key),
  DROP COLUMN lease_until;
