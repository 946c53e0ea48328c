-- +goose Up
-- The step runtime's hardening (issue 10).

-- claim_step, as in 00001, plus: at most one running attempt per (task,
-- step, part). A different attempt of a part whose attempt holds an
-- unexpired lease is refused as 'held' (held_until: that lease), so a
-- re-drive of a step that was only waiting never runs beside it. Claims of
-- one part are serialized by an advisory lock, so two attempts claimed at
-- the same moment cannot both start.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION claim_step(p_task uuid, p_step text, p_part text, p_attempt integer,
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
    PERFORM pg_advisory_xact_lock(hashtextextended('claim/' || p_task::text || '/' || p_step || '/' || p_part, 0));
    SELECT max(s.lease_until) INTO v_lease FROM task_steps s
     WHERE s.task_id = p_task AND s.step = p_step AND s.part = p_part AND s.attempt <> p_attempt
       AND s.status = 'running' AND s.lease_until >= now();
    IF v_lease IS NOT NULL THEN
        RETURN QUERY SELECT 'held'::text, NULL::bigint, v_base, v_lease;
        RETURN;
    END IF;
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

-- finish_step, as in 00001, plus: a missing row is DF002 (the claim was
-- lost, e.g. in a crash: retry), not DF001 (another worker holds or ended
-- the attempt: ack).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION finish_step(p_id bigint, p_worker text, p_status text, p_error text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE task_steps SET status = p_status, error = p_error, finished_at = now(), lease_until = NULL
     WHERE id = p_id AND worker = p_worker AND status = 'running';
    IF FOUND THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM task_steps WHERE id = p_id) THEN
        RAISE EXCEPTION 'step attempt % has no row: its claim was lost', p_id USING ERRCODE = 'DF002';
    END IF;
    RAISE EXCEPTION 'step attempt % is no longer held by %', p_id, p_worker USING ERRCODE = 'DF001';
END
$$;
-- +goose StatementEnd

-- outbox: a row the broker refuses (unroutable, nacked, its exchange gone)
-- must not block the rows behind it. The relay records each failed publish
-- on the row and tries it again after a growing pause.
ALTER TABLE outbox
    ADD COLUMN failures    integer NOT NULL DEFAULT 0,
    ADD COLUMN last_error  text NOT NULL DEFAULT '',
    ADD COLUMN next_try_at timestamptz;

-- +goose Down
ALTER TABLE outbox DROP COLUMN failures, DROP COLUMN last_error, DROP COLUMN next_try_at;
-- finish_step of 00001 comes back; claim_step keeps its stricter form (one
-- running attempt per part is right for the code of 00001 too).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION finish_step(p_id bigint, p_worker text, p_status text, p_error text) RETURNS void
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
