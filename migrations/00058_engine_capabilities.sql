-- +goose Up
-- What each worker's engine can do, as the worker announces it at start and
-- refreshes while it runs (pkg/admit.Announce): asr the source languages it
-- hears, translate its pairs ("en|es"), tts the languages it speaks; "*"
-- for any. The doors (console, dubctl, extract_audio) judge a task's
-- languages by these rows (pkg/admit.LoadCapabilities); a step without a
-- row is not judged. One row per worker process; rows not refreshed for a
-- week are removed by the next announcement.
CREATE TABLE engine_capabilities (
    step      text        NOT NULL CHECK (step IN ('asr', 'translate', 'tts')),
    worker    text        NOT NULL,
    engine    text        NOT NULL,
    languages jsonb       NOT NULL CHECK (jsonb_typeof(languages) = 'array'),
    seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (step, worker)
);
CREATE INDEX engine_capabilities_seen ON engine_capabilities (step, seen_at DESC);

-- +goose Down
DROP TABLE engine_capabilities;
