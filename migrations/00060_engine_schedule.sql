-- +goose Up
-- The shared schedule of the engine pools (issue 30, pkg/pool): one row per
-- engine of a step's pool, written by every replica of every worker, so
-- that all of them see one quota, one rate and one breaker per engine.
-- used counts the daily quota in the step's unit (asr: audio seconds;
-- translate, tts: characters) since window_start, the last reset.
-- next_available_at spaces calls by the engine's requests per minute;
-- cooled_until is set by a 429 (its Retry-After) or a spent quota;
-- failures counts server errors in a row, breaker_until opens the breaker.
-- in_flight counts the live reservations (engine_reservations); a
-- reservation whose worker died expires and is reaped by the next one.
CREATE TABLE engine_schedule (
    step              text        NOT NULL CHECK (step IN ('asr', 'translate', 'tts')),
    name              text        NOT NULL,
    kind              text        NOT NULL DEFAULT '',
    weight            integer     NOT NULL DEFAULT 1 CHECK (weight >= 1),
    rpm               integer     NOT NULL DEFAULT 0 CHECK (rpm >= 0),
    concurrency       integer     NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
    daily_quota       bigint      NOT NULL DEFAULT 0 CHECK (daily_quota >= 0),
    fallback          boolean     NOT NULL DEFAULT false,
    window_start      timestamptz NOT NULL DEFAULT 'epoch',
    used              bigint      NOT NULL DEFAULT 0,
    in_flight         integer     NOT NULL DEFAULT 0,
    next_available_at timestamptz NOT NULL DEFAULT 'epoch',
    cooled_until      timestamptz NOT NULL DEFAULT 'epoch',
    failures          integer     NOT NULL DEFAULT 0,
    errors            bigint      NOT NULL DEFAULT 0,
    breaker_until     timestamptz NOT NULL DEFAULT 'epoch',
    calls             bigint      NOT NULL DEFAULT 0,
    last_error        text        NOT NULL DEFAULT '',
    last_error_at     timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (step, name)
);

CREATE TABLE engine_reservations (
    id         bigserial   PRIMARY KEY,
    step       text        NOT NULL,
    name       text        NOT NULL,
    units      bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    FOREIGN KEY (step, name) REFERENCES engine_schedule (step, name) ON DELETE CASCADE
);
CREATE INDEX engine_reservations_expiry ON engine_reservations (step, expires_at);

-- +goose Down
DROP TABLE engine_reservations;
DROP TABLE engine_schedule;
