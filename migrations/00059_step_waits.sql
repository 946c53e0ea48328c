-- +goose Up
-- Steps that wait for an engine (issue 30). An attempt whose step found no
-- engine of its pool able to serve (quota spent, rate limited, breakers
-- open) ends failed with wait_reason (no_quota, rate_limit, no_engine) and
-- wait_until, the time it can go on; a delay tier re-offers the step then.
-- Such attempts do not count against the retry budget: claim_step moves
-- the budget's base attempt past each of them. The reconciler counts the
-- part as waiting (active) until wait_until, not as lost.
ALTER TABLE task_steps
    ADD COLUMN wait_reason text NOT NULL DEFAULT '',
    ADD COLUMN wait_until  timestamptz;
CREATE INDEX task_steps_waiting ON task_steps (task_id) WHERE wait_until IS NOT NULL;

-- claim_step, as in 00040, plus: the base attempt (the first of the
-- current retry budget) moves up by one for every waited attempt since
-- the last replay, so that waiting spends no retry.
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
    v_base := v_base + (SELECT count(*) FROM task_steps s
                         WHERE s.task_id = p_task AND s.step = p_step AND s.part = p_part
                           AND s.attempt >= v_base AND s.attempt < p_attempt AND s.wait_until IS NOT NULL);
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

-- +goose Down
-- claim_step of 00040 comes back.
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
DROP INDEX task_steps_waiting;
ALTER TABLE task_steps DROP COLUMN wait_reason, DROP COLUMN wait_until;
