-- +goose Up
-- Cancel stops work (issue 47). A task that ended cancelled or failed, or
-- whose parent an operator cancelled, takes no new attempt: claim_step
-- answers 'ended' before anything else, and the step runtime acks the
-- message without retry or dead letter (pkg/step's decide). task_stopped
-- is the one definition of "its work stops", which claim_step and the
-- runtime's lease heartbeat (pkg/internal/attempt's Extend) read; a running
-- step learns it sooner from dubflow_task_status (pkg/task's Watcher).
--
-- A parent's cancel cancels its open children in the same statement, but
-- skips a child whose row another transaction holds at that moment (see
-- pkg/task's cancelChildrenSQL): the parent's own status stops such a
-- child's work here, and the reconciler cancels the child. A parent that
-- its children ended cancelled (its error does not start "cancelled:")
-- stops nothing: a retried child of it runs.
-- +goose StatementBegin
CREATE FUNCTION task_stopped(p_task uuid) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE
             WHEN t.status IN ('cancelled', 'failed') THEN t.status
             WHEN p.status = 'cancelled' AND p.error LIKE 'cancelled:%' THEN 'cancelled'
           END
      FROM tasks t LEFT JOIN tasks p ON p.id = t.parent_task_id
     WHERE t.id = p_task
$$;
-- +goose StatementEnd

-- claim_step, as in 00059, plus the check of task_stopped first.
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
    IF task_stopped(p_task) IS NOT NULL THEN
        RETURN QUERY SELECT 'ended'::text, NULL::bigint, NULL::integer, NULL::timestamptz;
        RETURN;
    END IF;
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
-- claim_step of 00059 comes back.
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
DROP FUNCTION task_stopped(uuid);
