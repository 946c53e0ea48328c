-- +goose Up
-- Paused steps (pkg/worker): while a step's row says paused, every worker
-- of the step cancels its consumers (in-flight steps finish) and consumes
-- again when it says otherwise; workers read it every second. One row per
-- step ever paused, keeping who changed it last and when.
CREATE TABLE queue_pauses (
    step       text        PRIMARY KEY CHECK (step IN ('extract_audio', 'asr', 'translate', 'tts', 'mux_video')),
    paused     boolean     NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    changed_by text        NOT NULL DEFAULT ''
);

-- Worker processes (pkg/worker): each writes its row at start and every few
-- seconds (heartbeat_at, the database's clock) with what its consumers run
-- now and how many step runs it finished; stopped_at is set on a graceful
-- stop. A row whose heartbeat is older than the lost threshold is a lost
-- worker. Rows not refreshed for a day are removed by the heartbeats.
CREATE TABLE worker_processes (
    id           text        PRIMARY KEY,
    service      text        NOT NULL,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    version      text        NOT NULL,
    steps        text[]      NOT NULL,
    consumers    integer     NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    stopped_at   timestamptz,
    running      jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(running) = 'array'),
    done         bigint      NOT NULL DEFAULT 0,
    failed       bigint      NOT NULL DEFAULT 0
);
CREATE INDEX worker_processes_heartbeat ON worker_processes (heartbeat_at DESC);

-- +goose Down
DROP TABLE worker_processes;
DROP TABLE queue_pauses;
