-- +goose Up
-- Review before the voice (issue 49): a task submitted with review
-- ("transcript", "translation") stops in a status of its own, review, after
-- asr (or after translate), and waits for a person's edits of its lines; an
-- approval lets the chain go on with them. A task in review is never stuck
-- and never alerted: nothing runs and nothing is owed, so the reconciler's
-- bounds (RECONCILE_*) do not apply to it.
--
-- tasks.review: the stages the submission asked to review, in order.
-- tasks.review_stage: the stage the task waits in (or last waited in),
-- review_since: when it began to wait; both written by pkg/task's Hold.
ALTER TABLE tasks
    DROP CONSTRAINT tasks_status_check,
    ADD CONSTRAINT tasks_status_check
        CHECK (status IN ('queued', 'running', 'compensating', 'review', 'done', 'failed', 'cancelled')),
    ADD COLUMN review text[] NOT NULL DEFAULT '{}'
        CHECK (review <@ ARRAY['transcript', 'translation']::text[]),
    ADD COLUMN review_stage text NOT NULL DEFAULT ''
        CHECK (review_stage IN ('', 'transcript', 'translation')),
    ADD COLUMN review_since timestamptz;

CREATE INDEX tasks_in_review ON tasks (updated_at) WHERE status = 'review';

-- review_edits: every change a person made to a task's lines while it was in
-- review, and each approval (pkg/dub is its only writer): who, when, which
-- line (numbered from 1 as the lines read at that moment; NULL for an import
-- or an approval), and the lines before and after (JSON arrays of lines:
-- start_ms, end_ms, speaker, source, text). The task's timeline shows them.
CREATE TABLE review_edits (
    id       bigserial PRIMARY KEY,
    task_id  uuid NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    at       timestamptz NOT NULL DEFAULT now(),
    actor    text NOT NULL DEFAULT '',
    action   text NOT NULL CHECK (action IN ('edit', 'split', 'merge', 'delete', 'import', 'approve')),
    stage    text NOT NULL CHECK (stage IN ('transcript', 'translation')),
    line     integer CHECK (line >= 1),
    before   jsonb NOT NULL DEFAULT '[]',
    after    jsonb NOT NULL DEFAULT '[]',
    -- waited_since: on an approval, when the task began to wait (the
    -- timeline's review event of that stage).
    waited_since timestamptz
);
CREATE INDEX review_edits_task ON review_edits (task_id, id);

-- steps_done_now: whether every registered part of each of the task's
-- steps has succeeded, seen after taking the task's review lock and in a
-- fresh snapshot (a volatile function's own query), so that of several
-- parts committing at once the last one to commit sees the others: the
-- guard of a transition taken by the part that completes the last of the
-- steps (pkg/task's Hold of a task that reviews its translation, after the
-- last of asr's chunks and translate's batches).
-- +goose StatementBegin
CREATE FUNCTION steps_done_now(p_task uuid, p_steps text[]) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_step text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('review/' || p_task::text, 0));
    FOREACH v_step IN ARRAY p_steps LOOP
        IF NOT step_succeeded(p_task, v_step) THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION steps_done_now(uuid, text[]);
DROP TABLE review_edits;
DROP INDEX tasks_in_review;
UPDATE tasks SET status = 'running' WHERE status = 'review';
ALTER TABLE tasks
    DROP COLUMN review_since,
    DROP COLUMN review_stage,
    DROP COLUMN review,
    DROP CONSTRAINT tasks_status_check,
    ADD CONSTRAINT tasks_status_check
        CHECK (status IN ('queued', 'running', 'compensating', 'done', 'failed', 'cancelled'));
