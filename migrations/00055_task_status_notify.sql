-- +goose Up
-- Every change of a task's status is announced on the notification channel
-- dubflow_task_status (pkg/task.StatusChannel), the task id as payload, at
-- the commit that made it: `dubctl wait` LISTENs and reads the task as soon
-- as it ends instead of up to a poll interval later.
-- +goose StatementBegin
CREATE FUNCTION notify_task_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('dubflow_task_status', NEW.id::text);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER tasks_status_notify AFTER UPDATE OF status ON tasks
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION notify_task_status();

-- +goose Down
DROP TRIGGER tasks_status_notify ON tasks;
DROP FUNCTION notify_task_status();
