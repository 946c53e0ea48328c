-- +goose Up
-- Several target languages in one submission (issue 13, item 7). The task
-- submitted names its languages (targets); it extracts and transcribes the
-- audio once, and where its asr step completes it spawns one child task per
-- language (parent_task_id) that translates, synthesizes and muxes its own
-- output. The parent ends when all of its children have ended.
ALTER TABLE tasks ADD COLUMN parent_task_id uuid REFERENCES tasks (id) ON DELETE CASCADE;
ALTER TABLE tasks ADD COLUMN targets text[] NOT NULL DEFAULT '{}';
-- One child per language: a redelivered or replayed fan-in never makes a
-- second one.
CREATE UNIQUE INDEX tasks_child_language ON tasks (parent_task_id, target_language)
    WHERE parent_task_id IS NOT NULL;

-- conclude_parent: a child of p_parent moved to p_status (done or failed);
-- when every child has ended, the parent ends too: done when all are done,
-- failed with each failed child's language and error otherwise, announced by
-- the parent's event.task.succeeded / event.task.failed (returned: the
-- outbox id, NULL when nothing was concluded). Called from the child's
-- transition (pkg/task), in the same statement, which has written the
-- child's row already: p_child's status is taken from p_status, the
-- siblings' from a fresh snapshot taken after the parent's row is locked,
-- so two children ending at the same moment cannot both miss the other.
-- A parent that was cancelled, or is done, is left alone; a parent failed by
-- its children is concluded again (done) when a replayed child succeeds.
-- +goose StatementBegin
CREATE FUNCTION conclude_parent(p_parent uuid, p_child uuid, p_status text) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_parent   tasks;
    v_open     integer;
    v_failed   text;
    v_result   jsonb;
    v_status   text;
    v_event    text;
    v_body     jsonb;
    v_id       bigint;
BEGIN
    SELECT * INTO v_parent FROM tasks WHERE id = p_parent FOR UPDATE;
    IF NOT FOUND OR v_parent.status = 'done' OR v_parent.error LIKE 'cancelled:%' THEN
        RETURN NULL;
    END IF;
    SELECT count(*) FILTER (WHERE c.status NOT IN ('done', 'failed')),
           string_agg(c.target_language || ': ' || c.error, '; ' ORDER BY c.target_language)
               FILTER (WHERE c.status = 'failed'),
           jsonb_object_agg(c.target_language, jsonb_build_object('task_id', c.id, 'status', c.status,
               'output_video_key', c.output_video_key))
      INTO v_open, v_failed, v_result
      FROM (SELECT t.id, t.target_language, t.output_video_key, t.error,
                   CASE WHEN t.id = p_child THEN p_status ELSE t.status END AS status
              FROM tasks t WHERE t.parent_task_id = p_parent) c;
    IF v_open > 0 THEN
        RETURN NULL;
    END IF;
    IF v_failed IS NULL THEN
        v_status := 'done';
        v_event := 'task.succeeded';
        v_failed := '';
    ELSE
        IF v_parent.status = 'failed' THEN
            RETURN NULL;
        END IF;
        v_status := 'failed';
        v_event := 'task.failed';
        v_failed := left('languages: ' || v_failed, 4000);
    END IF;
    v_result := jsonb_build_object('languages', v_result);
    UPDATE tasks SET status = v_status, error = v_failed, result = v_result, updated_at = now()
     WHERE id = p_parent;
    v_body := jsonb_build_object('event_id', gen_random_uuid(), 'event', v_event, 'task_id', p_parent,
        'status', v_status, 'occurred_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'data', v_result);
    IF v_parent.trace_id <> '' THEN
        v_body := v_body || jsonb_build_object('trace_id', v_parent.trace_id);
    END IF;
    IF v_status = 'failed' THEN
        v_body := v_body || jsonb_build_object('error', v_failed);
    END IF;
    INSERT INTO outbox (message_id, exchange, routing_key, body)
    VALUES ((v_body->>'event_id')::uuid, 'task_exchange', 'event.' || v_event, convert_to(v_body::text, 'UTF8'))
    RETURNING id INTO v_id;
    RETURN v_id;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION conclude_parent(uuid, uuid, text);
DROP INDEX tasks_child_language;
ALTER TABLE tasks DROP COLUMN targets;
ALTER TABLE tasks DROP COLUMN parent_task_id;
