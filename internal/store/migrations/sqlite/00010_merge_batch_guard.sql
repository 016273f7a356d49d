-- A guard that must exclude a writer on another database node has to be a
-- write: on a Galera cluster a locking read (SELECT … FOR UPDATE) is never
-- certified, so it does not stop an UPDATE of the same row on another node.
-- BatchApply's OnlyIf guard ("only while the batch is still RUNNING")
-- therefore bumps guard_seq with an UPDATE pinned to that status instead of
-- reading the row FOR UPDATE: the cluster orders that write against a
-- settlement's write of the same row and aborts the later one (1213), which
-- is re-run and then sees the other's result. The counter means nothing
-- else; it is not the row's version, which settlements pin and which this
-- guard must not move.

-- +goose Up
ALTER TABLE merge_batch ADD COLUMN guard_seq BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE merge_batch DROP COLUMN guard_seq;
