-- +goose Up
-- step_parts.message: the envelope the runtime emitted for the part. A part
-- whose message was lost before any worker claimed it has no attempt in
-- task_steps to replay from, and a translate part cannot be rebuilt from its
-- name when its segment ids were too long and the name is a hash; the
-- reconciler re-drives such a part from this copy. NULL for parts recorded
-- before this migration (the reconciler then rebuilds what it can).
ALTER TABLE step_parts ADD COLUMN message bytea;

-- The reconciler reads which messages each step's workers claimed lately
-- (how far a queue got) to tell a message waiting in it from a lost one.
CREATE INDEX task_steps_step_started ON task_steps (step, started_at);

-- +goose Down
DROP INDEX task_steps_step_started;
ALTER TABLE step_parts DROP COLUMN message;
