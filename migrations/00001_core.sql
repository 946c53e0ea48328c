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
    -- running: claimed under a lease; succeeded; failed: this attempt failed
    -- (its retry or dead letter left through the outbox); parked: stopped
    -- without retry, waiting for an operator (TTS compensation).
    status       text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'parked')),
    worker       text NOT NULL DEFAULT '',
    lease_until  timestamptz,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    error        text NOT NULL DEFAULT '',
    -- message is the envelope this attempt ran from, so an operator or the
    -- reconciler can re-drive the step without the original delivery.
    message      bytea,
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

-- step_replays: a replay (from the DLQ, from tts_requeue) starts a fresh retry
-- budget at base_attempt; earlier attempts stay in task_steps as history.
CREATE TABLE step_replays (
    task_id       uuid NOT NULL,
    step          text NOT NULL,
    part          text NOT NULL DEFAULT '',
    base_attempt  integer NOT NULL,
    reason        text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_id, step, part, base_attempt)
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
-- No index but the key: the outbox holds only messages not yet published,
-- so it stays small, and every index would be paid on each hand-off.

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

-- step_succeeded: a step has succeeded when it has a succeeded row and every
-- part it was fanned out into has one.
-- +goose StatementBegin
CREATE FUNCTION step_succeeded(p_task uuid, p_step text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM task_steps s
                   WHERE s.task_id = p_task AND s.step = p_step AND s.status = 'succeeded')
       AND NOT EXISTS (SELECT 1 FROM step_parts p
                       WHERE p.task_id = p_task AND p.step = p_step
                         AND NOT EXISTS (SELECT 1 FROM task_steps s
                                         WHERE s.task_id = p.task_id AND s.step = p.step
                                           AND s.part = p.part AND s.status = 'succeeded'))
$$;
-- +goose StatementEnd

-- claim_step: the runtime's compare-and-swap claim of one attempt of one
-- part of a step. Outcomes: claimed (the caller holds the lease), done (the
-- part already succeeded), waiting (the predecessor step has not succeeded),
-- held (another live worker holds this attempt; held_until says how long),
-- finished (this attempt already failed or was parked: a duplicate).
-- The claim commits without waiting for the WAL flush (synchronous_commit
-- off for its transaction only): a claim lost in a Postgres crash costs at
-- most a re-run of the step, because the success, which is committed
-- synchronously, requires the claim (finish_step) and is unique per part.
-- +goose StatementBegin
CREATE FUNCTION claim_step(p_task uuid, p_step text, p_part text, p_attempt integer,
                           p_worker text, p_lease interval, p_after text, p_message bytea)
RETURNS TABLE (outcome text, step_id bigint, base_attempt integer, held_until timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_id     bigint;
    v_status text;
    v_lease  timestamptz;
    v_base   integer;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    IF EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = p_task AND s.step = p_step
               AND s.part = p_part AND s.status = 'succeeded') THEN
        RETURN QUERY SELECT 'done'::text, NULL::bigint, NULL::integer, NULL::timestamptz;
        RETURN;
    END IF;
    IF p_after <> '' AND NOT step_succeeded(p_task, p_after) THEN
        RETURN QUERY SELECT 'waiting'::text, NULL::bigint, NULL::integer, NULL::timestamptz;
        RETURN;
    END IF;
    SELECT coalesce(max(r.base_attempt), 1) INTO v_base FROM step_replays r
     WHERE r.task_id = p_task AND r.step = p_step AND r.part = p_part AND r.base_attempt <= p_attempt;
    INSERT INTO task_steps AS s (task_id, step, part, attempt, status, worker, lease_until, started_at, message)
    VALUES (p_task, p_step, p_part, p_attempt, 'running', p_worker, now() + p_lease, now(), p_message)
    ON CONFLICT (task_id, step, part, attempt) DO UPDATE
       SET worker = EXCLUDED.worker, lease_until = EXCLUDED.lease_until, started_at = now()
     WHERE s.status = 'running' AND s.lease_until < now()
    RETURNING s.id INTO v_id;
    IF v_id IS NOT NULL THEN
        RETURN QUERY SELECT 'claimed'::text, v_id, v_base, NULL::timestamptz;
        RETURN;
    END IF;
    SELECT s.status, s.lease_until INTO v_status, v_lease FROM task_steps s
     WHERE s.task_id = p_task AND s.step = p_step AND s.part = p_part AND s.attempt = p_attempt;
    IF v_status = 'running' THEN
        RETURN QUERY SELECT 'held'::text, NULL::bigint, v_base, v_lease;
    ELSE
        RETURN QUERY SELECT 'finished'::text, NULL::bigint, v_base, NULL::timestamptz;
    END IF;
END
$$;
-- +goose StatementEnd

-- finish_step: ends a claimed attempt; raises DF001 when the caller no
-- longer holds it (its lease ran out and another worker took over), which
-- rolls back everything committed with it.
-- +goose StatementBegin
CREATE FUNCTION finish_step(p_id bigint, p_worker text, p_status text, p_error text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE task_steps SET status = p_status, error = p_error, finished_at = now(), lease_until = NULL
     WHERE id = p_id AND worker = p_worker AND status = 'running';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'step attempt % is no longer held by %', p_id, p_worker USING ERRCODE = 'DF001';
    END IF;
END
$$;
-- +goose StatementEnd

-- emit_when_done: fan-in. Serialized per task and step by an advisory lock,
-- it adds the next step's message to the outbox only when every part of
-- p_step has succeeded and the next part was not emitted before — so the
-- next step is triggered exactly once however many parts finish at once.
-- +goose StatementBegin
CREATE FUNCTION emit_when_done(p_task uuid, p_step text, p_next text, p_next_part text,
                               p_message_id uuid, p_exchange text, p_key text, p_body bytea)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_task::text || '/' || p_step, 0));
    IF NOT step_succeeded(p_task, p_step) THEN
        RETURN NULL;
    END IF;
    INSERT INTO step_parts (task_id, step, part) VALUES (p_task, p_next, p_next_part)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbox (message_id, exchange, routing_key, body)
    VALUES (p_message_id, p_exchange, p_key, p_body) RETURNING id INTO v_id;
    RETURN v_id;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION emit_when_done(uuid, text, text, text, uuid, text, text, bytea);
DROP FUNCTION finish_step(bigint, text, text, text);
DROP FUNCTION claim_step(uuid, text, text, integer, text, interval, text, bytea);
DROP FUNCTION step_succeeded(uuid, text);
DROP TABLE dead_letters;
DROP TABLE outbox;
DROP TABLE segments;
DROP TABLE step_replays;
DROP TABLE step_parts;
DROP TABLE task_steps;
DROP TABLE tasks;
