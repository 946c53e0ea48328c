-- +goose Up
-- tasks: one row per dubbing job.
CREATE TABLE tasks (
    id                uuid PRIMARY KEY,
    status            text NOT NULL DEFAULT 'queued'
                      CHECK (status IN ('queued', 'running', 'compensating', 'done', 'failed')),
    source_language   text NOT NULL DEFAULT '',
    target_language   text NOT NULL DEFAULT '',
    speaker_id        text NOT NULL DEFAULT '',
    source_video_key  text NOT NULL DEFAULT '',
    output_video_key  text NOT NULL DEFAULT '',
    result            jsonb NOT NULL DEFAULT '{}'::jsonb,
    error             text NOT NULL DEFAULT '',
    trace_id          text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tasks_status_updated_idx ON tasks (status, updated_at);

-- task_steps: every attempt of every step (and of every part of a fanned-out
-- step). The seed's UNIQUE(task_id, step, attempt) extended by part; a part
-- has at most one succeeded row.
CREATE TABLE task_steps (
    id           bigserial PRIMARY KEY,
    task_id      uuid NOT NULL,
    step         text NOT NULL,
    part         text NOT NULL DEFAULT '',
    attempt      integer NOT NULL CHECK (attempt >= 1),
    status       text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    worker       text NOT NULL DEFAULT '',
    lease_until  timestamptz,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    error        text NOT NULL DEFAULT '',
    UNIQUE (task_id, step, part, attempt)
);
CREATE UNIQUE INDEX task_steps_one_success ON task_steps (task_id, step, part) WHERE status = 'succeeded';
CREATE INDEX task_steps_running_lease ON task_steps (lease_until) WHERE status = 'running';

-- step_parts: the parts a step was fanned out into (one row per message the
-- runtime emitted). A step has succeeded when each of its parts has.
CREATE TABLE step_parts (
    task_id     uuid NOT NULL,
    step        text NOT NULL,
    part        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, step, part)
);

-- segments: the speech segments of a task.
CREATE TABLE segments (
    task_id          uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    idx              integer NOT NULL CHECK (idx >= 0),
    start_ms         integer NOT NULL CHECK (start_ms >= 0),
    end_ms           integer NOT NULL,
    src_text         text NOT NULL DEFAULT '',
    mt_text          text,
    tts_audio_key    text,
    tts_params_json  jsonb,
    tts_error        text NOT NULL DEFAULT '',
    tts_failures     integer NOT NULL DEFAULT 0,
    tts_failed_at    timestamptz,
    PRIMARY KEY (task_id, idx),
    CHECK (end_ms >= start_ms)
);
CREATE INDEX segments_tts_missing ON segments (task_id) WHERE tts_audio_key IS NULL;

-- outbox: messages committed with the step that produced them, relayed to
-- RabbitMQ with publisher confirms and deleted once confirmed.
CREATE TABLE outbox (
    id           bigserial PRIMARY KEY,
    message_id   uuid NOT NULL,
    exchange     text NOT NULL,
    routing_key  text NOT NULL,
    body         bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_created_idx ON outbox (created_at);

-- dead_letters: every message that reached task.dlq.
CREATE TABLE dead_letters (
    id               bigserial PRIMARY KEY,
    message_id       text NOT NULL DEFAULT '',
    task_id          uuid,
    step             text NOT NULL DEFAULT '',
    attempt          integer NOT NULL DEFAULT 0,
    error_class      text NOT NULL DEFAULT '',
    failure_reason   text NOT NULL DEFAULT '',
    original_message jsonb,
    raw_body         bytea,
    routing_key      text NOT NULL DEFAULT '',
    source           text NOT NULL DEFAULT 'service',
    failed_at        timestamptz NOT NULL DEFAULT now(),
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    replayed_at      timestamptz,
    replay_count     integer NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX dead_letters_message_id ON dead_letters (message_id) WHERE message_id <> '';
CREATE INDEX dead_letters_task_idx ON dead_letters (task_id);
CREATE INDEX dead_letters_step_failed_idx ON dead_letters (step, failed_at);

-- +goose Down
DROP TABLE dead_letters;
DROP TABLE outbox;
DROP TABLE segments;
DROP TABLE step_parts;
DROP TABLE task_steps;
DROP TABLE tasks;
