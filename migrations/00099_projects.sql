-- +goose Up
-- Projects are records (issue 51): the tenants a dubbing service runs for.
-- Every task belongs to one (tasks.project names it; the local stack's is
-- 'default', and this migration assigns the tasks before it to 'default'
-- unless their project already named one). A project has:
--   shared_engines        whether its tasks may use the shared engines at all
--                         (false: its own engine pool entries only);
--   daily_shared_minutes  the minutes of video its tasks may take through the
--                         shared engines a day (UTC); NULL: no limit. A task
--                         past it waits with reason project_quota until the
--                         next day (project_usage below counts the minutes);
--   fair_scope            'project': the long tasks of the project share its
--                         places in each step's window (held_parts), so that
--                         projects take turns; 'task': each task has its own
--                         window, as a task without a project had (the
--                         default project's: one team's stack behaves as it did).
-- tasks.project keeps no foreign key: an outside publisher's message naming
-- a project that is not here is dead-lettered at extract_audio, and the
-- doors that create tasks (console, dubctl) check the project first.
CREATE TABLE projects (
    id                   text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    name                 text NOT NULL DEFAULT '' CHECK (length(name) <= 200),
    shared_engines       boolean NOT NULL DEFAULT true,
    daily_shared_minutes integer CHECK (daily_shared_minutes IS NULL OR daily_shared_minutes >= 0),
    fair_scope           text NOT NULL DEFAULT 'project' CHECK (fair_scope IN ('project', 'task')),
    created_at           timestamptz NOT NULL DEFAULT now(),
    created_by           text NOT NULL DEFAULT ''
);
INSERT INTO projects (id, name, fair_scope, created_by) VALUES ('default', 'Default project', 'task', 'migration');
INSERT INTO projects (id, name, created_by)
SELECT DISTINCT project, project, 'migration' FROM tasks
 WHERE project ~ '^[a-z0-9][a-z0-9_-]{0,62}$' ON CONFLICT DO NOTHING;
UPDATE tasks SET project = 'default' WHERE project !~ '^[a-z0-9][a-z0-9_-]{0,62}$';
ALTER TABLE tasks ALTER COLUMN project SET DEFAULT 'default';
CREATE INDEX tasks_project_created ON tasks (project, created_at DESC, id DESC);

-- api_tokens: the tokens of a project, created through the API or dubctl
-- (the tokens of the configuration, DUBFLOW_API_TOKEN(S), stay admins
-- across every project). Only the SHA-256 of the secret is kept; the
-- secret is shown once. role: admin (its project's tokens too), operator
-- (the project's tasks and dead letters), read. A token past expires_at
-- or with revoked_at is refused by every replica at its next request: each
-- request reads its row (by digest, indexed), as a logged-out session is
-- read from console_revoked_sessions.
CREATE TABLE api_tokens (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project     text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (name ~ '^[A-Za-z0-9_-]{1,64}$'),
    role        text NOT NULL CHECK (role IN ('admin', 'operator', 'read')),
    digest      bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    created_by  text NOT NULL DEFAULT '',
    expires_at  timestamptz,
    revoked_at  timestamptz,
    revoked_by  text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (project, name) WHERE revoked_at IS NULL;

-- project_usage: the minutes of video each project's tasks took through
-- the shared engines, per UTC day; project_charges: which task was charged
-- on which day (once: a replayed or redelivered step is not charged again).
CREATE TABLE project_usage (
    project        text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    day            date NOT NULL,
    shared_seconds double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (project, day)
);
CREATE TABLE project_charges (
    task_id    uuid PRIMARY KEY,
    project    text NOT NULL,
    day        date NOT NULL,
    seconds    double precision NOT NULL,
    charged_at timestamptz NOT NULL DEFAULT now()
);

-- window_scope is the scope of a task's windows of held parts: its
-- project, unless the project's fair_scope is 'task' (or the task has
-- none): then '' (the task alone).
-- +goose StatementBegin
CREATE FUNCTION window_scope(p_task uuid) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT CASE WHEN t.project = '' OR p.fair_scope = 'task' THEN '' ELSE t.project END
                       FROM tasks t LEFT JOIN projects p ON p.id = t.project WHERE t.id = p_task), '')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION release_held(p_task uuid, p_step text) RETURNS TABLE(o_id bigint, o_message_id uuid, o_exchange text, o_routing_key text, o_body bytea)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_project text;
    v_id      bigint;
    r         record;
BEGIN
    v_project := window_scope(p_task);
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION release_part(p_task uuid, p_step text, p_part text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_project text;
    v_held    held_parts;
    v_flight  integer;
    v_id      bigint;
BEGIN
    v_project := window_scope(p_task);
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION release_held(p_task uuid, p_step text) RETURNS TABLE(o_id bigint, o_message_id uuid, o_exchange text, o_routing_key text, o_body bytea)
    LANGUAGE plpgsql
    AS $$
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION release_part(p_task uuid, p_step text, p_part text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
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
DROP FUNCTION window_scope(uuid);
DROP TABLE project_charges;
DROP TABLE project_usage;
DROP TABLE api_tokens;
DROP INDEX tasks_project_created;
ALTER TABLE tasks ALTER COLUMN project SET DEFAULT '';
DROP TABLE projects;
