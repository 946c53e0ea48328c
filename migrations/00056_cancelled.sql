-- +goose Up
-- A cancelled task has a status of its own (issue 28, item 7): until now
-- Cancel set it failed with the error "cancelled: <reason>", so that a
-- cancelled task read as failed and could not be listed apart. The tasks
-- cancelled so far become cancelled; the CHECK keeps its name, which
-- pkg/task.MapError reads a refused transition from. The active statuses
-- (queued, running, compensating) are unchanged, and so are the indexes and
-- functions that list them (tasks_project_live, claim windows) and the
-- status-notify trigger (any change of status).
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
UPDATE tasks SET status = 'cancelled' WHERE status = 'failed' AND error LIKE 'cancelled:%';
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check
    CHECK (status IN ('queued', 'running', 'compensating', 'done', 'failed', 'cancelled'));

-- conclude_parent: a child of p_parent ended as p_status (done, failed or
-- cancelled); when every child has ended, the parent ends too: done when all
-- are done; failed when one failed; cancelled when none failed but one was
-- cancelled — the error naming each language that failed or was cancelled,
-- announced by the parent's event.task.succeeded / failed / cancelled
-- (returned: the outbox id, NULL when nothing was concluded). Called from
-- the child's transition (pkg/task), in the same statement, which has
-- written the child's row already: p_child's status is taken from p_status,
-- the siblings' from a fresh snapshot taken after the parent's row is
-- locked, so two children ending at the same moment cannot both miss the
-- other. A parent done, or cancelled by an operator (its error starts
-- "cancelled:"), is left alone; a parent that its children ended failed or
-- cancelled is concluded again when a retried child ends differently (done
-- when it succeeds).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION conclude_parent(p_parent uuid, p_child uuid, p_status text) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_parent   tasks;
    v_open     integer;
    v_ended    text;
    v_failed   boolean;
    v_result   jsonb;
    v_status   text;
    v_event    text;
    v_body     jsonb;
    v_id       bigint;
BEGIN
    SELECT * INTO v_parent FROM tasks WHERE id = p_parent FOR UPDATE;
    IF NOT FOUND OR v_parent.status = 'done'
       OR (v_parent.status = 'cancelled' AND v_parent.error LIKE 'cancelled:%') THEN
        RETURN NULL;
    END IF;
    SELECT count(*) FILTER (WHERE c.status NOT IN ('done', 'failed', 'cancelled')),
           string_agg(c.target_language || ': ' || c.error, '; ' ORDER BY c.target_language)
               FILTER (WHERE c.status IN ('failed', 'cancelled')),
           coalesce(bool_or(c.status = 'failed'), false),
           jsonb_object_agg(c.target_language, jsonb_build_object('task_id', c.id, 'status', c.status,
               'output_video_key', c.output_video_key))
      INTO v_open, v_ended, v_failed, v_result
      FROM (SELECT t.id, t.target_language, t.output_video_key, t.error,
                   CASE WHEN t.id = p_child THEN p_status ELSE t.status END AS status
              FROM tasks t WHERE t.parent_task_id = p_parent) c;
    IF v_open > 0 THEN
        RETURN NULL;
    END IF;
    IF v_ended IS NULL THEN
        v_status := 'done';
        v_event := 'task.succeeded';
        v_ended := '';
    ELSE
        v_status := CASE WHEN v_failed THEN 'failed' ELSE 'cancelled' END;
        IF v_parent.status = v_status THEN
            RETURN NULL;
        END IF;
        v_event := 'task.' || v_status;
        v_ended := left('languages: ' || v_ended, 4000);
    END IF;
    v_result := jsonb_build_object('languages', v_result);
    UPDATE tasks SET status = v_status, error = v_ended, result = v_result, updated_at = now()
     WHERE id = p_parent;
    v_body := jsonb_build_object('event_id', gen_random_uuid(), 'event', v_event, 'task_id', p_parent,
        'status', v_status, 'occurred_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'data', v_result);
    IF v_parent.trace_id <> '' THEN
        v_body := v_body || jsonb_build_object('trace_id', v_parent.trace_id);
    END IF;
    IF v_status <> 'done' THEN
        v_body := v_body || jsonb_build_object('error', v_ended);
    END IF;
    INSERT INTO outbox (message_id, exchange, routing_key, body)
    VALUES ((v_body->>'event_id')::uuid, 'task_exchange', 'event.' || v_event, convert_to(v_body::text, 'UTF8'))
    RETURNING id INTO v_id;
    RETURN v_id;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION conclude_parent(p_parent uuid, p_child uuid, p_status text) RETURNS bigint
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
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
UPDATE tasks SET status = 'failed' WHERE status = 'cancelled';
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check
    CHECK (status IN ('queued', 'running', 'compensating', 'done', 'failed'));
