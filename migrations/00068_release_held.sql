-- +goose Up
-- Fair fan-out for parts that are held one by one (issue 32): the translate
-- batches each asr chunk emits and the tts part each translate batch emits
-- are held in their task's window as they come, not all at once as a long
-- audio's chunks are. A part's success must then release what is held at
-- its commit, not what it read before: otherwise a part held by another
-- transaction while the last part in flight commits finds the window full
-- and is never released.

-- hold_part: holds a part's message in its window (unless the part already
-- succeeded, or it is held already) and releases it at once if the window
-- has room (release_part); returns the outbox id, or NULL while it is held.
-- +goose StatementBegin
CREATE FUNCTION hold_part(p_task uuid, p_step text, p_part text, p_window integer,
                          p_message_id uuid, p_exchange text, p_key text, p_body bytea)
RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO held_parts (task_id, step, part, window_size, message_id, exchange, routing_key, body)
    SELECT p_task, p_step, p_part, p_window, p_message_id, p_exchange, p_key, p_body
     WHERE NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = p_task AND s.step = p_step
                         AND s.part = p_part AND s.status = 'succeeded')
    ON CONFLICT DO NOTHING;
    RETURN release_part(p_task, p_step, p_part);
END
$$;
-- +goose StatementEnd

-- release_held: releases, under the window's lock (the one release_part
-- takes), the held parts of the step in the task's scope (its project's
-- live tasks, or the task alone) that the window has room for, the tasks in
-- turn (a task's n-th held part ranks n plus its parts in flight), and
-- returns the outbox rows it added. The candidates are read after the lock
-- is taken, so a part held by a transaction that committed meanwhile is
-- among them, and a transaction holding a part after this one's commit
-- sees this part succeeded.
-- +goose StatementBegin
CREATE FUNCTION release_held(p_task uuid, p_step text)
RETURNS TABLE (o_id bigint, o_message_id uuid, o_exchange text, o_routing_key text, o_body bytea)
LANGUAGE plpgsql AS $$
DECLARE
    v_project text;
    v_id      bigint;
    r         record;
BEGIN
    v_project := coalesce((SELECT t.project FROM tasks t WHERE t.id = p_task), '');
    PERFORM pg_advisory_xact_lock(hashtextextended('window/' ||
        CASE WHEN v_project = '' THEN 'task/' || p_task::text ELSE 'project/' || v_project END || '/' || p_step, 0));
    FOR r IN
        WITH cand AS (
            SELECT h.task_id, h.part, h.message_id, h.exchange, h.routing_key, h.body, h.window_size, h.seq,
                   row_number() OVER (PARTITION BY h.task_id ORDER BY h.seq) AS turn
              FROM held_parts h
             WHERE h.step = p_step AND (h.task_id = p_task OR (v_project <> '' AND h.task_id IN
                   (SELECT t.id FROM tasks t WHERE t.project = v_project AND t.status IN ('queued', 'running'))))
        ), flight AS (
            SELECT p.task_id, count(*) AS n FROM step_parts p
             WHERE p.step = p_step AND p.task_id IN (SELECT DISTINCT c.task_id FROM cand c)
               AND NOT EXISTS (SELECT 1 FROM held_parts h WHERE h.task_id = p.task_id AND h.step = p.step AND h.part = p.part)
               AND NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = p.task_id AND s.step = p.step
                                 AND s.part = p.part AND s.status = 'succeeded')
             GROUP BY p.task_id
        )
        SELECT c.task_id, c.part, c.message_id, c.exchange, c.routing_key, c.body
          FROM cand c LEFT JOIN flight f ON f.task_id = c.task_id
         ORDER BY c.turn + coalesce(f.n, 0), c.seq
         LIMIT (SELECT max(c2.window_size) FROM cand c2)
    LOOP
        v_id := release_part(r.task_id, p_step, r.part);
        IF v_id IS NOT NULL THEN
            o_id := v_id; o_message_id := r.message_id; o_exchange := r.exchange;
            o_routing_key := r.routing_key; o_body := r.body;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION release_held(uuid, text);
DROP FUNCTION hold_part(uuid, text, text, integer, uuid, text, text, bytea);
