-- +goose Up
-- charge_shared charges p_seconds of a task's audio to its project's use of
-- the shared engines on p_day, once per task, in one call (asr runs it for
-- every whole audio: one round trip instead of a transaction of five
-- statements). The project's row is locked for the charge, so two tasks
-- never both take the last minutes. It answers:
--   verdict 'none'    no project row, a project on its own engines only, or
--                     the task was charged already (a replayed step);
--   verdict 'charged' charged now;
--   verdict 'over'    past the project's daily limit: nothing charged, and
--                     project, limit_minutes and used_seconds say why.
-- +goose StatementBegin
CREATE FUNCTION charge_shared(p_task uuid, p_seconds double precision, p_day date,
    OUT verdict text, OUT project text, OUT limit_minutes integer, OUT used_seconds double precision)
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_shared  boolean;
    v_charged boolean;
BEGIN
    verdict := 'none';
    SELECT p.id, p.daily_shared_minutes, p.shared_engines,
           EXISTS (SELECT 1 FROM project_charges c WHERE c.task_id = t.id)
      INTO project, limit_minutes, v_shared, v_charged
      FROM tasks t JOIN projects p ON p.id = t.project
     WHERE t.id = p_task
       FOR UPDATE OF p;
    IF NOT FOUND OR v_charged OR NOT v_shared THEN
        project := NULL;
        limit_minutes := NULL;
        RETURN;
    END IF;
    SELECT coalesce((SELECT u.shared_seconds FROM project_usage u
                      WHERE u.project = charge_shared.project AND u.day = p_day), 0)
      INTO used_seconds;
    IF limit_minutes IS NOT NULL AND used_seconds + p_seconds > limit_minutes * 60.0 THEN
        verdict := 'over';
        RETURN;
    END IF;
    INSERT INTO project_charges (task_id, project, day, seconds) VALUES (p_task, project, p_day, p_seconds);
    INSERT INTO project_usage AS u (project, day, shared_seconds) VALUES (project, p_day, p_seconds)
        ON CONFLICT ON CONSTRAINT project_usage_pkey DO UPDATE SET shared_seconds = u.shared_seconds + EXCLUDED.shared_seconds;
    verdict := 'charged';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION charge_shared(uuid, double precision, date);
