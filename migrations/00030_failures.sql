-- +goose Up
-- tts_compensations: every message that reached task.tts_compensation,
-- recorded against its segment by the dlq_recorder service, so that segments
-- whose synthesis failed never pile up unseen. A redelivered message is
-- recorded once (message_id is the AMQP message id, or a hash of the body).
-- requeued_at is set when tts_requeue re-drives the task.
CREATE TABLE tts_compensations (
    id           bigserial PRIMARY KEY,
    message_id   text NOT NULL UNIQUE,
    task_id      uuid NOT NULL,
    segment_idx  integer NOT NULL CHECK (segment_idx >= 0),
    error        text NOT NULL DEFAULT '',
    trace_id     text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    requeued_at  timestamptz
);
CREATE INDEX tts_compensations_segment_idx ON tts_compensations (task_id, segment_idx);
CREATE INDEX tts_compensations_pending_idx ON tts_compensations (task_id) WHERE requeued_at IS NULL;

-- tts_compensation_segments: per segment, how many compensation messages
-- it produced, the last error and when.
CREATE VIEW tts_compensation_segments AS
SELECT task_id, segment_idx,
       count(*)                                      AS times,
       (array_agg(error ORDER BY created_at DESC))[1] AS last_error,
       min(created_at)                               AS first_failed_at,
       max(created_at)                               AS last_failed_at,
       count(*) FILTER (WHERE requeued_at IS NULL)   AS pending
  FROM tts_compensations
 GROUP BY task_id, segment_idx;

-- +goose Down
DROP VIEW tts_compensation_segments;
DROP TABLE tts_compensations;
