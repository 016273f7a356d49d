-- An event that arrives while the step it would expedite is running (a
-- GitLab webhook saying "the pipeline finished" while the poll that read
-- it a moment before is still writing "wait") must not be lost: the step
-- would schedule its next poll after the full tier interval. WorkExpedite
-- notes the action on the running row; WorkComplete makes that action due
-- now instead of after its delay when the step schedules it again, and
-- clears the note. NULL: nothing noted.

-- +goose Up
ALTER TABLE operation ADD COLUMN expedite_action VARCHAR(64) NULL AFTER due_at;

-- +goose Down
ALTER TABLE operation DROP COLUMN expedite_action;
