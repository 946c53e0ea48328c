-- +goose Up
-- What operators of the console keep open (issue 31).
--
-- console_audit: who did what — every cancel, retry, redub, replay, purge,
-- pause, resume and login through the console, with the name of the token
-- (DUBFLOW_API_TOKENS name, or "admin"/"read" for the single tokens), the
-- target (a task id, a dead letter id, a step, a filter) and the outcome
-- ("ok" or the error code and message answered).
CREATE TABLE console_audit (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text NOT NULL DEFAULT '',
    role        text NOT NULL DEFAULT '',
    action      text NOT NULL,
    target      text NOT NULL DEFAULT '',
    outcome     text NOT NULL DEFAULT 'ok',
    status      integer NOT NULL DEFAULT 0,
    detail      jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX console_audit_at ON console_audit (at DESC, id DESC);
CREATE INDEX console_audit_target ON console_audit (target, at);

-- dead_letters_archive: every dead letter purged, as it was, with when and
-- by whom; a purge moves rows here in the statement that deletes them.
CREATE TABLE dead_letters_archive (
    id               bigint PRIMARY KEY,
    message_id       text NOT NULL DEFAULT '',
    task_id          uuid,
    step             text NOT NULL DEFAULT '',
    part             text NOT NULL DEFAULT '',
    attempt          integer NOT NULL DEFAULT 0,
    error_class      text NOT NULL DEFAULT '',
    failure_reason   text NOT NULL DEFAULT '',
    original_message jsonb,
    raw_body         bytea,
    routing_key      text NOT NULL DEFAULT '',
    source           text NOT NULL DEFAULT '',
    failed_at        timestamptz NOT NULL,
    recorded_at      timestamptz NOT NULL,
    replayed_at      timestamptz,
    replay_count     integer NOT NULL DEFAULT 0,
    purged_at        timestamptz NOT NULL DEFAULT now(),
    purged_by        text NOT NULL DEFAULT ''
);
CREATE INDEX dead_letters_archive_task ON dead_letters_archive (task_id);
CREATE INDEX dead_letters_error_class ON dead_letters (error_class, failed_at);

-- metric_samples: the console's metric history (GET /api/metrics/history).
-- One sampler across replicas writes a sample of each series every 15 s;
-- samples older than an hour are averaged into one a minute, older than a
-- day deleted — so the table holds at most ~1,620 rows per series and key.
CREATE TABLE metric_samples (
    series        text NOT NULL,
    key           text NOT NULL DEFAULT '',
    at            timestamptz NOT NULL,
    step_seconds  integer NOT NULL DEFAULT 15,
    value         double precision NOT NULL,
    PRIMARY KEY (series, key, step_seconds, at)
);
CREATE INDEX metric_samples_at ON metric_samples (step_seconds, at);

-- Search of the task list (GET /api/tasks?language=): tasks by language.
CREATE INDEX tasks_target_language_created ON tasks (target_language, created_at DESC, id DESC);

-- +goose Down
DROP INDEX tasks_target_language_created;
DROP TABLE metric_samples;
DROP INDEX dead_letters_error_class;
DROP TABLE dead_letters_archive;
DROP TABLE console_audit;
