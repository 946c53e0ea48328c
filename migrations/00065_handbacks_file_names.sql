-- +goose Up
-- What keeps issue 31 (the console's depth) open.
--
-- step_handbacks: the hand-backs of a step's message, written only by
-- pkg/internal/attempt (the attempts' owner). A worker hands a delivery
-- back without spending an attempt (shutdown cut the step short, a service
-- it needs was down, another worker holds the part's lease, the database
-- failed under the claim or the commit); nothing else records it, and the
-- task's timeline shows it from here. One row per task, step, part,
-- attempt and reason, counting the hand-backs (a message handed back a
-- thousand times is one row): the table grows with attempts, never with
-- the hand-backs themselves. detail is the last error, cut to 500 bytes.
CREATE TABLE step_handbacks (
    task_id   uuid        NOT NULL,
    step      text        NOT NULL,
    part      text        NOT NULL DEFAULT '',
    attempt   integer     NOT NULL,
    reason    text        NOT NULL,
    worker    text        NOT NULL DEFAULT '',
    detail    text        NOT NULL DEFAULT '',
    count     integer     NOT NULL DEFAULT 1,
    first_at  timestamptz NOT NULL DEFAULT now(),
    last_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, step, part, attempt, reason)
);

-- The name of the file a task's video was uploaded as (console upload,
-- presigned upload, dubctl submit: pkg/admit cleans it), for the task list
-- and its search (GET /api/tasks?q=).
ALTER TABLE tasks ADD COLUMN source_file_name text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tasks DROP COLUMN source_file_name;
DROP TABLE step_handbacks;
