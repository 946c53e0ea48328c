-- +goose Up
-- tasks.project: the tenant or project a task belongs to (optional, '' for
-- none). Fair fan-out (held_parts below) gives each project, not each of
-- its tasks, a window of places in a queue.
ALTER TABLE tasks ADD COLUMN project text NOT NULL DEFAULT '';
CREATE INDEX tasks_project_live ON tasks (project) WHERE project <> '' AND status IN ('queued', 'running');

-- Fair fan-out (issue 14): a step fanned out into many parts (the chunks of
-- a long audio) keeps at most a window of them in the queues at once. The
-- parts beyond the window wait here, their messages ready; each part that
-- succeeds releases the next one into the outbox, so the messages of tasks
-- submitted later interleave with the long task's instead of queueing behind
-- all of them.
CREATE TABLE held_parts (
    task_id      uuid NOT NULL,
    step         text NOT NULL,
    part         text NOT NULL,
    seq          bigserial,
    window_size  integer NOT NULL CHECK (window_size >= 1),
    message_id   uuid NOT NULL,
    exchange     text NOT NULL,
    routing_key  text NOT NULL,
    body         bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, step, part)
);
CREATE INDEX held_parts_order ON held_parts (task_id, step, seq);

-- release_part: moves the held part into the outbox if fewer than its
-- window of parts of that step are in flight (emitted, not held, not
-- succeeded) in its scope, and returns the outbox id; NULL when the part is
-- gone (released by another transaction) or the window is full. The scope
-- is the task's project (tasks.project, 00049) across its live tasks, or
-- the task alone when it has none: each project, not each of its tasks,
-- holds a window of places in the queue. Serialized per scope and step, so
-- that two parts finishing at once never overfill the window and never both
-- miss a free slot.
-- +goose StatementBegin
CREATE FUNCTION release_part(p_task uuid, p_step text, p_part text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
    v_held    held_parts;
    v_flight  integer;
    v_id      bigint;
BEGIN
    v_project := coalesce((SELECT t.project FROM tasks t WHERE t.id = p_task), '');
    PERFORM pg_advisory_xact_lock(hashtextextended('window/' ||
        CASE WHEN v_project = '' THEN 'task/' || p_task::text ELSE 'project/' || v_project END || '/' || p_step, 0));
    SELECT * INTO v_held FROM held_parts WHERE task_id = p_task AND step = p_step AND part = p_part;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO v_flight FROM step_parts p
     WHERE p.step = p_step
       AND (p.task_id = p_task OR (v_project <> '' AND p.task_id IN
            (SELECT t.id FROM tasks t WHERE t.project = v_project AND t.status IN ('queued', 'running'))))
       AND NOT EXISTS (SELECT 1 FROM held_parts h WHERE h.task_id = p.task_id AND h.step = p.step AND h.part = p.part)
       AND NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = p.task_id AND s.step = p.step
                         AND s.part = p.part AND s.status = 'succeeded');
    IF v_flight >= v_held.window_size THEN
        RETURN NULL;
    END IF;
    DELETE FROM held_parts WHERE task_id = p_task AND step = p_step AND part = p_part;
    INSERT INTO outbox (message_id, exchange, routing_key, body)
    VALUES (v_held.message_id, v_held.exchange, v_held.routing_key, v_held.body) RETURNING id INTO v_id;
    RETURN v_id;
END
$$;
-- +goose StatementEnd

-- emit_when_steps_done: fan-in over several steps whose parts finish in any
-- order (asr's chunks and the translate batches they emit): it adds the next
-- step's message to the outbox only when every step of p_steps has
-- succeeded and the next part was not emitted before. Serialized per task
-- and next step (not per finishing step as emit_when_done), so that the
-- last asr part and the last translate part, committing at the same moment,
-- cannot both miss the other's success.
-- +goose StatementBegin
CREATE FUNCTION emit_when_steps_done(p_task uuid, p_steps text[], p_next text, p_next_part text,
                                     p_message_id uuid, p_exchange text, p_key text, p_body bytea)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_step text;
    v_id   bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('fanin/' || p_task::text || '/' || p_next, 0));
    FOREACH v_step IN ARRAY p_steps LOOP
        IF NOT step_succeeded(p_task, v_step) THEN
            RETURN NULL;
        END IF;
    END LOOP;
    INSERT INTO step_parts (task_id, step, part, message) VALUES (p_task, p_next, p_next_part, p_body)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbox (message_id, exchange, routing_key, body)
    VALUES (p_message_id, p_exchange, p_key, p_body) RETURNING id INTO v_id;
    RETURN v_id;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION emit_when_steps_done(uuid, text[], text, text, uuid, text, text, bytea);
DROP FUNCTION release_part(uuid, text, text);
DROP TABLE held_parts;
DROP INDEX tasks_project_live;
ALTER TABLE tasks DROP COLUMN project;
