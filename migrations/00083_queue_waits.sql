-- +goose Up
-- Seed 003's waits and task metrics (issue 48).
--
-- queue_wait_ms: how long the attempt's message waited in its work queue,
-- from the moment it was ready there to the claim that created the attempt
-- row: ready is when its publisher published it (the outbox relay, the
-- runtime's re-publish), or, for a message that went through a delay tier,
-- that publish plus the tier's delay (a delay tier's wait is not queue
-- wait). The worker reads it from the message (step.ReadyAt) and passes it
-- to claim_step_waited. NULL when the message did not say (an outside
-- publisher's retry), and kept from the first claim: a take-over after a
-- lost lease (started_at moves) does not measure the dead worker's time.
ALTER TABLE task_steps ADD COLUMN queue_wait_ms bigint;

-- claim_step_waited: claim_step, and for an attempt it just created the
-- queue wait (p_ready: when the message was ready in its queue) recorded
-- on the row; returns the wait (seconds; NULL when not measured by this
-- claim) and the task's project for the wait histogram's label.
-- +goose StatementBegin
CREATE FUNCTION claim_step_waited(p_task uuid, p_step text, p_part text, p_attempt integer,
                                  p_worker text, p_lease interval, p_after text, p_message bytea,
                                  p_ready timestamptz)
RETURNS TABLE (outcome text, step_id bigint, base_attempt integer, held_until timestamptz,
               queue_wait double precision, project text)
LANGUAGE plpgsql AS $$
DECLARE
    c       record;
    v_wait  bigint;
BEGIN
    SELECT * INTO c FROM claim_step(p_task, p_step, p_part, p_attempt, p_worker, p_lease, p_after, p_message);
    IF c.outcome = 'claimed' AND p_ready IS NOT NULL THEN
        UPDATE task_steps s
           SET queue_wait_ms = greatest(0, round(extract(epoch FROM s.started_at - p_ready) * 1000))::bigint
         WHERE s.id = c.step_id AND s.queue_wait_ms IS NULL
        RETURNING s.queue_wait_ms INTO v_wait;
    END IF;
    RETURN QUERY SELECT c.outcome, c.step_id, c.base_attempt, c.held_until, v_wait / 1000.0::double precision,
        CASE WHEN v_wait IS NULL THEN ''
             ELSE coalesce((SELECT t.project FROM tasks t WHERE t.id = p_task), '') END;
END
$$;
-- +goose StatementEnd

-- task_metrics: one row per task, seed 003's task metrics derived from the
-- durable records (no writer of its own): created_at (the row's; filter on
-- it, tasks_created_idx), submitted_at (a child task counts from its
-- parent's submission), is_parent (a task of several languages, whose
-- children do the dubbing), first output (the first tts part that
-- succeeded: its segments' dubbed audio is stored at that commit),
-- completed (a done task's first mux_video success; for a parent, when it
-- ended done), the parts known so far and those succeeded, and the queue
-- wait per part (each part's attempts' queue_wait_ms summed; the mean over
-- the parts with a measured wait).
CREATE VIEW task_metrics AS
SELECT t.id AS task_id, t.project, t.status, t.parent_task_id, cardinality(t.targets) > 0 AS is_parent,
       t.created_at, coalesce(p.created_at, t.created_at) AS submitted_at,
       s.first_output_at,
       CASE WHEN t.status = 'done' THEN coalesce(s.muxed_at, t.updated_at) END AS completed_at,
       s.parts_done, s.parts_total, s.waited_parts, s.part_wait_seconds
  FROM tasks t
  LEFT JOIN tasks p ON p.id = t.parent_task_id
  CROSS JOIN LATERAL (
    SELECT min(a.first_success) FILTER (WHERE a.step = 'tts') AS first_output_at,
           min(a.first_success) FILTER (WHERE a.step = 'mux_video') AS muxed_at,
           count(*) FILTER (WHERE a.first_success IS NOT NULL)::integer AS parts_done,
           count(*)::integer AS parts_total,
           count(a.wait_ms)::integer AS waited_parts,
           avg(a.wait_ms) / 1000.0 AS part_wait_seconds
      FROM (SELECT x.step, x.part, min(x.finished_at) FILTER (WHERE x.status = 'succeeded') AS first_success,
                   sum(x.queue_wait_ms) AS wait_ms
              FROM (SELECT ts.step, ts.part, ts.status, ts.finished_at, ts.queue_wait_ms
                      FROM task_steps ts WHERE ts.task_id = t.id
                    UNION ALL
                    SELECT sp.step, sp.part, '', NULL, NULL FROM step_parts sp WHERE sp.task_id = t.id) x
             GROUP BY x.step, x.part) a
  ) s;

-- task_processing_metrics: the same in the shape of seed 003's table, one
-- row per event of a task: created, first_output (the seed's first_sent),
-- completed; parts_done the parts succeeded by then (the seed's
-- subtasks_sent), parts_total the parts known now (total_subtasks); project
-- stands where the seed has user_id.
CREATE VIEW task_processing_metrics AS
SELECT m.task_id, m.project, e.status, e.at AS "timestamp",
       (SELECT count(DISTINCT (ts.step, ts.part))::integer FROM task_steps ts
         WHERE ts.task_id = m.task_id AND ts.status = 'succeeded' AND ts.finished_at <= e.at) AS parts_done,
       m.parts_total
  FROM task_metrics m
  CROSS JOIN LATERAL (VALUES ('created', m.submitted_at), ('first_output', m.first_output_at),
                             ('completed', m.completed_at)) e(status, at)
 WHERE e.at IS NOT NULL;

-- +goose Down
DROP VIEW task_processing_metrics;
DROP VIEW task_metrics;
DROP FUNCTION claim_step_waited(uuid, text, text, integer, text, interval, text, bytea, timestamptz);
ALTER TABLE task_steps DROP COLUMN queue_wait_ms;
