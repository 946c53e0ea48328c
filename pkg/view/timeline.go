package view

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Kinds of timeline events.
const (
	EventCreated            = "created"              // the task was submitted
	EventAttemptStarted     = "attempt_started"      // a worker claimed an attempt of a step's part
	EventAttemptEnded       = "attempt_ended"        // the attempt succeeded, failed or was parked (Status)
	EventRetry              = "retry"                // a failed attempt was retried after DelayMS (Detail: its error)
	EventReplay             = "replay"               // a fresh retry budget started (Detail: by what: a dlq replay, a console retry)
	EventDeadLetter         = "dead_letter"          // a message reached the dead-letter queue (Ref: its id)
	EventDeadLetterReplayed = "dead_letter_replayed" // the dead letter was replayed
	EventDeadLetterPurged   = "dead_letter_purged"   // the dead letter was purged (kept in the archive)
	EventCompensation       = "compensation"         // a segment's speech failed and waits (Ref: segment index)
	EventCompensationQueued = "compensation_requeued"
	EventVersion            = "version"  // an output version was started (Ref: its number; Detail: the new line)
	EventOperator           = "operator" // an operator's action through the console (Status: cancel, retry, redub…)
	// EventReview: the task began to wait in review for a person's edits
	// (Status: the stage, transcript or translation).
	EventReview = "review"
	// EventReviewEdit: a person changed the task's lines in review (Status:
	// edit, split, merge, delete, import; Actor: who; Ref: the line;
	// Detail: the lines before and after).
	EventReviewEdit = "review_edit"
	// EventReviewApproved: a person approved the lines and the task went
	// on (Status: the stage; Actor: who; Detail: how long it waited).
	EventReviewApproved = "review_approved"
	// EventEnded: the task ended (Status: done, failed, cancelled; Detail:
	// its error), at the time its status changed. It is always the last
	// event of an ended task's timeline: what the end stopped (a running
	// attempt cut short by a cancel) and what operators did after it are
	// listed before it.
	EventEnded = "ended"
	// EventFirstOutput: the task's first dubbed segments were stored (its
	// first tts part succeeded; seed 003's first_sent), Detail: seconds
	// since the submission.
	EventFirstOutput = "first_output"
	// EventHandBack: a worker gave the message back without an outcome
	// and without spending a retry (Status: why — shutdown, unavailable,
	// lease_held, waits_for_predecessor, claim_error, claim_lost,
	// commit_failed, publish_failed, or wait_no_quota, wait_rate_limit,
	// wait_no_engine for the engines' pool; Count: how many times, the
	// last at Until; Detail: the last error).
	EventHandBack = "hand_back"
	// EventSkipped: the task's plan leaves a step out (Step), so that no
	// attempt of it is made — asr for a task from subtitles, translate for
	// subtitles in the target language (Detail: why; Ref: the subtitles'
	// key) — at the time the plan was recorded.
	EventSkipped = "skipped"
)

// Event is one entry of a task's timeline.
type Event struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Step    string    `json:"step,omitempty"`
	Part    string    `json:"part,omitempty"`
	Attempt *int      `json:"attempt,omitempty"`
	Worker  string    `json:"worker,omitempty"`
	Status  string    `json:"status,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	// DelayMS is how long a retry waited: from the failed attempt's end to
	// the next attempt's start.
	DelayMS *int64 `json:"delayMs,omitempty"`
	// Actor is the token name of an operator's action.
	Actor string `json:"actor,omitempty"`
	// Ref is what the event names: a dead letter id, a segment, a version.
	Ref string `json:"ref,omitempty"`
	// Count and Until (hand_back) are how many hand-backs of the attempt
	// for the reason one event stands for, and the time of the last.
	Count *int       `json:"count,omitempty"`
	Until *time.Time `json:"until,omitempty"`
}

// timelineSQL derives the timeline from the durable records: the task row,
// its plan's skipped steps, every attempt of the task and its hand-backs,
// step_replays, dead letters (and purged ones in the archive), TTS
// compensations, output versions, the review's waits, edits and approvals,
// and the console's audit log. The rank orders events of the same instant; the
// ended event comes last whatever its time.
var timelineSQL = `
WITH a AS (
  ` + attempt.SequenceSQL("$1") + `
), hb AS (
  ` + attempt.HandBacksSQL("$1") + `
), d AS (
  SELECT id, step, part, attempt, error_class, failure_reason, failed_at, replayed_at, NULL::timestamptz AS purged_at, '' AS purged_by
    FROM dead_letters WHERE task_id = $1
  UNION ALL
  SELECT id, step, part, attempt, error_class, failure_reason, failed_at, replayed_at, purged_at, purged_by
    FROM dead_letters_archive WHERE task_id = $1
), ev AS (
SELECT created_at AS at, 0 AS rank, 'created' AS kind, '' AS step, '' AS part, NULL::int AS attempt, '' AS worker,
       '' AS status, source_video_key AS detail, NULL::bigint AS delay_ms, '' AS actor, '' AS ref FROM tasks WHERE id = $1
UNION ALL
SELECT pl.created_at, 1, 'skipped', sk.step, '', NULL, '', '',
       CASE sk.step WHEN 'asr' THEN 'the segments come from the subtitles given (' || pl.subtitles_language || ')'
            ELSE 'the subtitles are in the target language (' || pl.subtitles_language || '): spoken as they are' END,
       NULL, '', pl.subtitles_key
  FROM task_plans pl, unnest(pl.skipped_steps) AS sk(step) WHERE pl.task_id = $1
UNION ALL
SELECT started_at, 1, 'attempt_started', step, part, attempt, worker, '', '', NULL, '', '' FROM a
UNION ALL
SELECT finished_at, 2, 'attempt_ended', step, part, attempt, worker, status, error, NULL, '', '' FROM a WHERE finished_at IS NOT NULL
UNION ALL
SELECT finished_at, 3, 'retry', step, part, next_attempt, worker, '', error,
       (extract(epoch FROM next_start - finished_at) * 1000)::bigint, '', '' FROM a
 WHERE status = 'failed' AND next_attempt IS NOT NULL AND finished_at IS NOT NULL
   AND wait_until IS NULL -- a wait is a hand-back (hb), not a retry
   AND NOT EXISTS (SELECT 1 FROM step_replays r WHERE r.task_id = $1 AND r.step = a.step AND r.part = a.part
                   AND r.base_attempt = a.next_attempt)
UNION ALL
SELECT created_at, 4, 'replay', step, part, base_attempt, '', '', reason, NULL, '', '' FROM step_replays WHERE task_id = $1
UNION ALL
SELECT failed_at, 3, 'dead_letter', step, part, attempt, '', error_class, failure_reason, NULL, '', id::text FROM d
UNION ALL
SELECT replayed_at, 3, 'dead_letter_replayed', step, part, attempt, '', '', '', NULL, '', id::text FROM d WHERE replayed_at IS NOT NULL
UNION ALL
SELECT purged_at, 3, 'dead_letter_purged', step, part, attempt, '', '', '', NULL, purged_by, id::text FROM d WHERE purged_at IS NOT NULL
UNION ALL
SELECT created_at, 3, 'compensation', 'tts', '', NULL, '', '', error, NULL, '', segment_idx::text FROM tts_compensations WHERE task_id = $1
UNION ALL
SELECT requeued_at, 3, 'compensation_requeued', 'tts', '', NULL, '', '', '', NULL, '', segment_idx::text
  FROM tts_compensations WHERE task_id = $1 AND requeued_at IS NOT NULL
UNION ALL
SELECT created_at, 4, 'version', '', '', NULL, '', '', coalesce(text, ''), NULL, '', version::text FROM output_versions WHERE task_id = $1
UNION ALL
SELECT at, 4, 'operator', '', '', NULL, '', action, outcome, NULL, actor, '' FROM console_audit
 WHERE target = $1::text AND action IN ('cancel', 'retry', 'redub', 'submit')
UNION ALL
SELECT waited_since, 4, 'review', '', '', NULL, '', stage, '', NULL, '', '' FROM review_edits
 WHERE task_id = $1 AND action = 'approve' AND waited_since IS NOT NULL
UNION ALL
SELECT t.review_since, 4, 'review', '', '', NULL, '', t.review_stage, '', NULL, '', '' FROM tasks t
 WHERE t.id = $1 AND t.review_since IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM review_edits e WHERE e.task_id = $1 AND e.action = 'approve' AND e.waited_since = t.review_since)
UNION ALL
SELECT at, 4, CASE WHEN action = 'approve' THEN 'review_approved' ELSE 'review_edit' END, '', '', NULL, '',
       CASE WHEN action = 'approve' THEN stage ELSE action END,
       CASE WHEN action = 'approve' THEN 'waited ' || round(extract(epoch FROM at - waited_since))::text || ' s'
            ELSE jsonb_build_object('before', before, 'after', after)::text END,
       NULL, actor, coalesce(line::text, '')
  FROM review_edits WHERE task_id = $1
UNION ALL
SELECT first_output_at, 3, 'first_output', 'tts', '', NULL, '', '',
       round(extract(epoch FROM first_output_at - submitted_at)::numeric, 3)::text || ' s after submission', NULL, '', ''
  FROM task_metrics WHERE task_id = $1 AND first_output_at IS NOT NULL
UNION ALL
SELECT updated_at, 5, 'ended', '', '', NULL, '', status, error, NULL, '', '' FROM tasks
 WHERE id = $1 AND status IN ('done', 'failed', 'cancelled')
)
SELECT * FROM (
SELECT ev.*, NULL::int AS count, NULL::timestamptz AS until FROM ev
UNION ALL
SELECT first_at, 3, 'hand_back', step, part, attempt, worker, reason, detail, NULL, '', '', count, last_at FROM hb
) t ORDER BY kind = 'ended', at, rank, attempt NULLS FIRST`

// Timeline returns every event of the task in the order it happened,
// derived from durable records (the outbox's events are deleted once
// sent), hand-backs included.
func Timeline(ctx context.Context, db Querier, taskID uuid.UUID) ([]Event, error) {
	if err := exists(ctx, db, taskID); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, timelineSQL, taskID)
	if err != nil {
		return nil, fmt.Errorf("read timeline of %s: %w", taskID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		var rank int
		err := r.Scan(&e.At, &rank, &e.Kind, &e.Step, &e.Part, &e.Attempt, &e.Worker, &e.Status, &e.Detail,
			&e.DelayMS, &e.Actor, &e.Ref, &e.Count, &e.Until)
		if err == nil && e.Kind == EventReviewEdit {
			e.Detail = editDetail(e.Status, e.Ref, e.Detail)
		}
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read timeline of %s: %w", taskID, err)
	}
	if out == nil {
		out = []Event{}
	}
	return out, nil
}
