package task

import (
	"encoding/json"
	"fmt"
	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/internal/outboxrow"
	"strings"

	"github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// StatusChannel is the Postgres notification channel on which every change
// of a task's status is announced, the task's id as payload, when the
// transaction that made it commits (a trigger on tasks): a client waiting
// for a task LISTENs on it rather than polling.
const StatusChannel = "dubflow_task_status"

// Ref names the task a transition changes and what its event reports.
type Ref struct {
	ID uuid.UUID
	// Step is the step that caused the transition, if any.
	Step string
	// Trace is the task's trace id; empty takes the one on the task's row.
	Trace string
}

// RefOf returns the Ref of the task a message belongs to, with its step and
// trace.
func RefOf(env *wire.Envelope) Ref {
	return Ref{ID: env.TaskID, Step: env.Step, Trace: env.TraceID}
}

// Details are what a task row records besides its status.
type Details struct {
	ID             uuid.UUID
	SourceLanguage string
	TargetLanguage string
	SpeakerID      string
	SourceVideoKey string
	OutputVideoKey string
	TraceID        string
	// Project is the tenant or project the task belongs to ('' for none);
	// only Settle records it, and an empty one keeps what is recorded.
	Project string
	// Targets are the languages of a task that dubs into several at once
	// (wire.ExtractAudio.Targets; none for one language): where its asr
	// step completes, it spawns one child task per language (Spawn). Settle
	// keeps what is recorded when it has none.
	Targets []string
	// FileName is the name the video was uploaded as (admit.Task's); only
	// Create records it, and a child task inherits its parent's (Spawn).
	FileName string
	// Review lists the stages the task stops at for a person's edits
	// (StageTranscript, StageTranslation; none: it runs through). Settle
	// keeps what is recorded when it has none.
	Review []string
	// SourceProbe is the probe of the source video (media.ProbeRecord's
	// JSON; nil for none): the door's (Create), which extract_audio
	// reuses, then extract_audio's (Settle), which mux_video reuses; a
	// child task inherits its parent's (Spawn).
	SourceProbe []byte
}

// Create makes the task's row, queued, and announces task.queued. A task
// that exists already is kept as it is (Result.Changed is false).
func Create(d Details) Transition {
	args := detailArgs(d)
	args["source_file_name"] = d.FileName
	args["source_probe"] = probeArg(d.SourceProbe)
	ref := Ref{ID: d.ID, Trace: d.TraceID}
	ev := newEvent(ref, wire.EventTaskQueued, Queued, nil)
	t := Transition{Name: "create", TaskID: d.ID, Event: ev}
	t.SQL, t.Args = positional(createSQL, withEvent(args, ref, ev))
	return t
}

// Settle records the languages, speaker and keys the first step settled
// (extract_audio), creating the row if it is missing; the status is
// untouched and nothing is announced. A trace id already recorded stays.
func Settle(d Details) Transition {
	args := detailArgs(d)
	args["project"] = d.Project
	args["source_probe"] = probeArg(d.SourceProbe)
	t := Transition{Name: "settle", TaskID: d.ID}
	t.SQL, t.Args = positional(settleSQL, args)
	return t
}

// Start records that a step of the task succeeded: a queued task becomes
// running (task.started), a running one only moves its updated_at. A task
// that is compensating, done, failed or cancelled is kept: a late part of a
// failed task is recorded in its step attempts, not here.
func Start(ref Ref) Transition {
	return start.transition(ref, nil, nil)
}

// Touch moves the updated_at of a task that is not finished (queued,
// running, compensating), without changing its status or announcing
// anything: the reconciler re-drove it, and waits again before the next
// re-drive.
func Touch(id uuid.UUID) Transition {
	return touch.transition(Ref{ID: id}, nil, nil)
}

// Compensate sets a running task compensating with reason (task.compensating):
// some of its speech could not be synthesized and waits for tts_requeue. A
// task compensating already only records the new reason.
func Compensate(ref Ref, reason string) Transition {
	reason = wire.ErrorText(reason)
	return compensate.transition(ref, map[string]any{"error": reason},
		func(e *wire.Event) { e.Error = wire.Reason(reason) })
}

// Resume sets a compensating task running again (task.resumed) and clears
// its error: its missing speech was re-driven (tts_requeue) or synthesized
// (tts). A running task is kept running.
func Resume(ref Ref) Transition {
	return resume.transition(ref, nil, nil)
}

// Succeed sets a running task done with its result (task.succeeded, with
// the result as the event's data); outputVideoKey, when not empty, replaces
// the task's output key. The event's id is derived from the task and the
// output key (SucceededEventID): a success announced and then lost with
// the primary of an asynchronous database, and reached again, is announced
// under the same id, which integrators deduplicate by.
func Succeed(ref Ref, result json.RawMessage, outputVideoKey string) Transition {
	if len(result) == 0 {
		result = json.RawMessage(`{}`)
	}
	return succeed.transition(ref, map[string]any{"result": []byte(result), "output_video_key": outputVideoKey},
		func(e *wire.Event) {
			e.EventID = SucceededEventID(ref.ID, outputVideoKey)
			e.OutputVideoKey, e.Data = outputVideoKey, result
		})
}

// succeededSpace is the name space of the success events' ids.
var succeededSpace = uuid.MustParse("6f1d2a57-3c3e-4b7e-9a55-2f0c7d1e8b42")

// SucceededEventID is the id of task's task.succeeded event for the output
// outputVideoKey: one success of one output has one id, however often it
// is reached (a re-dub writes another output, under another id).
func SucceededEventID(task uuid.UUID, outputVideoKey string) uuid.UUID {
	return uuid.NewSHA1(succeededSpace, []byte(task.String()+"/"+outputVideoKey))
}

// Fail sets a task failed for reason (task.failed, naming ref.Step): a
// step's part failed for good, or nobody moved the task on in time. The
// reason is stored as given (the step runtime and the dead-letter recorder
// write "<step>: <why>"). A task that is done is kept, and so is a task
// whose failing part (ref.Step, part) has succeeded since: a stale dead
// letter of a duplicate. A task failed already keeps its first error and
// is not announced again; a task cancelled stays cancelled (a dead letter
// of a part that was running when it was cancelled).
func Fail(ref Ref, part, reason string) Transition {
	reason = wire.ErrorText(reason)
	return fail.transition(ref, map[string]any{"error": reason, "step": ref.Step, "part": part},
		func(e *wire.Event) { e.Error = wire.Reason(reason) })
}

// NoSpeech is the error of a task whose audio holds no speech (FailNoSpeech),
// the same at every door.
const NoSpeech = "no speech found in the audio"

// FailNoSpeech fails a task whose audio holds no speech, with the error
// "<ref.Step>: no speech found in the audio" (task.failed): there is
// nothing to dub, and a video without a dub is not done. The step that
// found it (asr) applies it with its own success, so its part's success
// does not keep the task as Fail's stale dead letter would.
func FailNoSpeech(ref Ref) Transition {
	reason := NoSpeech
	if ref.Step != "" {
		reason = ref.Step + ": " + reason
	}
	return fail.transition(ref, map[string]any{"error": reason, "step": "", "part": ""},
		func(e *wire.Event) { e.Error = wire.Reason(reason) })
}

// Cancel ends a task that is not finished: it becomes cancelled with the
// error "cancelled: <reason>" (task.cancelled, status cancelled). A task
// done, failed or cancelled already is refused.
func Cancel(ref Ref, reason string) Transition {
	reason = "cancelled: " + wire.CleanText(reason)
	return cancel.transition(ref, map[string]any{"error": reason},
		func(e *wire.Event) { e.Error = wire.Reason(reason) })
}

// Retry sets a failed or cancelled (or still queued) task running again
// with its error cleared (task.retried): an operator replays a step. A task
// running or compensating is kept; a task done is refused.
func Retry(ref Ref) Transition {
	return retry.transition(ref, nil, nil)
}

// ChangeSpeaker records speaker as the voice of a task an operator retries
// with another voice (pkg/retry): failed, cancelled or compensating; its
// status is kept and nothing is announced (the retry's own transition
// announces it). Any other status is refused.
func ChangeSpeaker(ref Ref, speaker string) Transition {
	return changeSpeaker.transition(ref, map[string]any{"speaker": speaker}, nil)
}

// Redub sets a done task running again (task.redubbing): an operator
// re-dubs part of it. Any other status is refused.
func Redub(ref Ref) Transition {
	return redub.transition(ref, nil, nil)
}

// The stages a task may stop at for review (tasks.review, wire's review).
const (
	// StageTranscript stops the task after asr, before translate.
	StageTranscript = wire.ReviewTranscript
	// StageTranslation stops the task after translate, before tts.
	StageTranslation = wire.ReviewTranslation
)

// Hold stops a queued or running task in review at stage (task.review,
// the stage as its data): its lines wait for a person's edits, and nothing
// of it runs until Approve. after names the steps whose completion the
// hold waits for (none: at once): the part that applies Hold with its
// success holds the task only when every part of each of those steps has
// succeeded by then, seen under the task's review lock in a fresh snapshot
// (steps_done_now), so that of several parts finishing at once exactly the
// last one holds it. A task in review already keeps waiting since it
// began; one compensating, done, failed or cancelled is kept (a late part
// of a task an operator cancelled).
func Hold(ref Ref, stage string, after ...string) Transition {
	data, _ := json.Marshal(map[string]string{"stage": stage})
	if after == nil {
		after = []string{}
	}
	return hold.transition(ref, map[string]any{"stage": stage, "after": after},
		func(e *wire.Event) { e.Data = data })
}

// Approve sets a task in review running again (task.approved, the stage
// approved as its data): a person approved its lines, and the caller
// stages the next messages in the same transaction (pkg/dub's Approve).
// Any other status is refused.
func Approve(ref Ref, stage string) Transition {
	data, _ := json.Marshal(map[string]string{"stage": stage})
	return approve.transition(ref, nil, func(e *wire.Event) { e.Data = data })
}

// rule describes a transition of an existing row; statement writes its SQL.
type rule struct {
	name string
	// from lists the statuses the transition moves on; to is the status
	// it moves them to, "" for the status they have (Touch).
	from []string
	to   string
	// keep lists the statuses left alone without an error.
	keep []string
	// set holds further assignments, guard a further condition that keeps
	// the row when false; both may use named arguments.
	set, guard string
	// event is announced when the status changes ("" for none).
	event string
	// concludes is set for the transitions that end a task: a child task
	// (Spawn) that ends may conclude its parent (concludeSQL).
	concludes bool
	// cascade is further SQL of the statement, after its event (Cancel
	// of a parent cancels its children: cancelChildrenSQL).
	cascade string
	sql     string
}

var (
	start = newRule(rule{name: "start", from: []string{Queued, Running}, to: Running,
		keep: []string{Compensating, Review, Done, Failed, Cancelled}, event: wire.EventTaskStarted})
	touch      = newRule(rule{name: "touch", from: []string{Queued, Running, Compensating}})
	compensate = newRule(rule{name: "compensate", from: []string{Running, Compensating}, to: Compensating,
		set: "error = @error", event: wire.EventTaskCompensating})
	resume = newRule(rule{name: "resume", from: []string{Compensating, Running}, to: Running,
		set: "error = ''", event: wire.EventTaskResumed})
	succeed = newRule(rule{name: "succeed", from: []string{Running}, to: Done,
		set: "error = '', result = @result::jsonb, " +
			"output_video_key = CASE WHEN @output_video_key = '' THEN t.output_video_key ELSE @output_video_key END",
		event: wire.EventTaskSucceeded, concludes: true})
	fail = newRule(rule{name: "fail", from: []string{Queued, Running, Compensating, Review, Failed}, to: Failed,
		keep:  []string{Done, Cancelled},
		set:   "error = CASE WHEN old.status = 'failed' AND t.error <> '' THEN t.error ELSE @error END",
		guard: `(@step = '' OR NOT ` + attempt.SucceededSQL("old.id", "@step", "@part") + `)`,
		event: wire.EventTaskFailed, concludes: true})
	cancel = newRule(rule{name: "cancel", from: []string{Queued, Running, Compensating, Review}, to: Cancelled,
		set: "error = @error", event: wire.EventTaskCancelled, concludes: true, cascade: cancelChildrenSQL})
	retry = newRule(rule{name: "retry", from: []string{Failed, Cancelled, Queued}, to: Running,
		keep: []string{Running, Compensating}, set: "error = ''", event: wire.EventTaskRetried})
	redub         = newRule(rule{name: "redub", from: []string{Done}, to: Running, set: "error = ''", event: wire.EventTaskRedubbing})
	changeSpeaker = newRule(rule{name: "change_speaker", from: []string{Failed, Cancelled, Compensating},
		set: "speaker_id = @speaker"})
	hold = newRule(rule{name: "hold", from: []string{Queued, Running, Review}, to: Review,
		keep:  []string{Compensating, Done, Failed, Cancelled},
		set:   "review_stage = @stage, review_since = CASE WHEN old.status = 'review' THEN t.review_since ELSE now() END",
		guard: "(cardinality(@after::text[]) = 0 OR steps_done_now(old.id, @after::text[]))", event: wire.EventTaskReview})
	approve = newRule(rule{name: "approve", from: []string{Review}, to: Running, set: "error = ''",
		event: wire.EventTaskApproved})
)

func newRule(r rule) *rule {
	r.sql = r.statement()
	return &r
}

// statement writes the rule's SQL. The row is locked first (old keeps the
// status it had); a status outside from and keep is written as
// "refused: <name> from <status>", which the table's status CHECK
// constraint rejects — so a refused transition fails its statement, and
// with it the transaction, and MapError reads the names back.
func (r *rule) statement() string {
	to := "old.status"
	if r.to != "" {
		to = quote(r.to)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `WITH old AS (
	SELECT id, status FROM tasks WHERE id = @id FOR UPDATE
), moved AS (
	UPDATE tasks t
	   SET status = CASE WHEN old.status IN (%s) THEN %s ELSE 'refused: %s from ' || old.status END,
	       updated_at = now()`, list(r.from), to, r.name)
	if r.set != "" {
		fmt.Fprintf(&b, ",\n\t       %s", r.set)
	}
	b.WriteString("\n\t  FROM old\n\t WHERE t.id = old.id")
	if len(r.keep) > 0 {
		fmt.Fprintf(&b, " AND old.status NOT IN (%s)", list(r.keep))
	}
	if r.guard != "" {
		fmt.Fprintf(&b, "\n\t   AND %s", r.guard)
	}
	b.WriteString("\n\tRETURNING old.status AS from_status, t.status AS to_status, t.trace_id, t.parent_task_id\n)")
	if r.event == "" {
		b.WriteString("\nSELECT (SELECT status FROM old), (SELECT to_status FROM moved), NULL::bigint")
		return b.String()
	}
	fmt.Fprintf(&b, `, event AS (
	`+outboxrow.InsertFrom+`
	SELECT @message_id, @exchange, @routing_key, %s
	  FROM moved WHERE moved.from_status <> moved.to_status
	RETURNING id
)`, eventBody("moved"))
	if r.concludes {
		b.WriteString(concludeSQL)
	}
	b.WriteString(r.cascade)
	b.WriteString("\nSELECT (SELECT status FROM old), (SELECT to_status FROM moved), (SELECT id FROM event)")
	if r.concludes {
		b.WriteString(" FROM (SELECT count(*) FROM concluded) AS c")
	}
	return b.String()
}

// transition builds the rule's Transition for ref; args are the rule's own
// named arguments, and edit completes its event.
func (r *rule) transition(ref Ref, args map[string]any, edit func(*wire.Event)) Transition {
	named := pgx.StrictNamedArgs{"id": ref.ID}
	for k, v := range args {
		named[k] = v
	}
	t := Transition{Name: r.name, TaskID: ref.ID}
	if r.event != "" {
		t.Event = newEvent(ref, r.event, r.to, edit)
		named = withEvent(named, ref, t.Event)
	}
	t.SQL, t.Args = positional(r.sql, named)
	return t
}

func detailArgs(d Details) map[string]any {
	targets, review := d.Targets, d.Review
	if targets == nil {
		targets = []string{}
	}
	if review == nil {
		review = []string{}
	}
	return map[string]any{"id": d.ID, "source_language": d.SourceLanguage, "target_language": d.TargetLanguage,
		"speaker_id": d.SpeakerID, "source_video_key": d.SourceVideoKey, "output_video_key": d.OutputVideoKey,
		"trace_id": d.TraceID, "targets": targets, "review": review}
}

// probeArg is the statement argument of a SourceProbe: its JSON text, or
// NULL for none.
func probeArg(probe []byte) any {
	if probe == nil {
		return nil
	}
	return string(probe)
}

// createSQL inserts the row unless it exists. Its first column reads the
// row as it was before the statement: NULL when the insert made it.
var createSQL = `WITH created AS (
	INSERT INTO tasks (id, status, source_language, target_language, speaker_id, source_video_key,
	                   output_video_key, trace_id, targets, source_file_name, source_probe, review)
	VALUES (@id, 'queued', @source_language, @target_language, @speaker_id, @source_video_key,
	        @output_video_key, @trace_id, @targets::text[], @source_file_name, @source_probe::jsonb, @review::text[])
	ON CONFLICT (id) DO NOTHING
	RETURNING status, trace_id
)` + createdEventTail

// createdEventTail ends a statement whose CTE "created" inserted a task
// row (RETURNING status, trace_id): it adds the task's event.task.created
// to the outbox and reads the status before, the status after and the
// outbox row, the three columns Transition.Scan expects.
var createdEventTail = `, event AS (
	` + outboxrow.InsertFrom + `
	SELECT @message_id, @exchange, @routing_key, ` + eventBody("created") + `
	  FROM created
	RETURNING id
)
SELECT (SELECT status FROM tasks WHERE id = @id), (SELECT status FROM created), (SELECT id FROM event)`

// settleSQL records the settled details; the status is not touched.
const settleSQL = `INSERT INTO tasks AS t (id, source_language, target_language, speaker_id, source_video_key,
	                   output_video_key, trace_id, project, targets, source_probe, review)
	VALUES (@id, @source_language, @target_language, @speaker_id, @source_video_key, @output_video_key, @trace_id,
	        @project, @targets::text[], @source_probe::jsonb, @review::text[])
	ON CONFLICT (id) DO UPDATE SET source_language = EXCLUDED.source_language,
	    target_language = EXCLUDED.target_language, speaker_id = EXCLUDED.speaker_id,
	    source_video_key = EXCLUDED.source_video_key, output_video_key = EXCLUDED.output_video_key,
	    source_probe = EXCLUDED.source_probe,
	    trace_id = CASE WHEN t.trace_id = '' THEN EXCLUDED.trace_id ELSE t.trace_id END,
	    project = CASE WHEN EXCLUDED.project = '' THEN t.project ELSE EXCLUDED.project END,
	    targets = CASE WHEN cardinality(EXCLUDED.targets) = 0 THEN t.targets ELSE EXCLUDED.targets END,
	    review = CASE WHEN cardinality(EXCLUDED.review) = 0 THEN t.review ELSE EXCLUDED.review END,
	    updated_at = now()
	RETURNING t.status, t.status, NULL::bigint`

// concludeSQL is the part of a terminal transition's statement that
// concludes the parent of a child that ended.
const concludeSQL = `, concluded AS (
	SELECT conclude_parent(moved.parent_task_id, @id, moved.to_status) AS id
	  FROM moved
	 WHERE moved.parent_task_id IS NOT NULL AND moved.from_status <> moved.to_status
	   AND moved.to_status IN ('done', 'failed', 'cancelled')
)`

// cancelChildrenSQL is the part of Cancel's statement that cancels the
// unfinished children of a parent it cancelled, each announced by its own
// task.cancelled. A child whose row another transaction holds at that
// moment (a step of it committing) is skipped rather than waited for, so
// that Cancel and a child's end, which locks the parent, never deadlock;
// such a child runs on, and its end leaves the cancelled parent alone.
const cancelChildrenSQL = `, children AS (
	UPDATE tasks k SET status = 'cancelled', error = @error, updated_at = now()
	  FROM (SELECT c.id FROM tasks c
	         WHERE c.parent_task_id = @id AND c.status IN ('queued', 'running', 'compensating', 'review')
	           AND EXISTS (SELECT 1 FROM moved WHERE moved.from_status <> moved.to_status)
	         FOR UPDATE OF c SKIP LOCKED) open
	 WHERE k.id = open.id
	RETURNING k.id, k.trace_id
), children_events AS (
	` + outboxrow.InsertFrom + `
	SELECT e.event_id, @exchange, @routing_key, convert_to(jsonb_strip_nulls(jsonb_build_object(
	           'event_id', e.event_id, 'event', '` + wire.EventTaskCancelled + `', 'task_id', e.id, 'status', 'cancelled',
	           'error', @error::text, 'occurred_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
	           'trace_id', nullif(e.trace_id, '')))::text, 'UTF8')
	  FROM (SELECT gen_random_uuid() AS event_id, children.id, children.trace_id FROM children) e
)`

// InheritedWorker is the worker recorded on the extract_audio and asr rows
// of a child task's step attempts: they ran once, on the parent.
func InheritedWorker(parent uuid.UUID) string { return "parent " + parent.String() }

// Spawn creates the child task of parent that dubs into language, queued
// (task.queued, whose data names the parent and the language), unless it
// exists already (Result.Changed false: a redelivered or replayed fan-in
// spawns nothing). The child's id is wire.ChildTaskID(parent, language); it
// reads its video from its own videos/{child}/source.mp4 (copied there
// from the parent's by the asr worker before Spawn commits) and writes
// outputs/{child}/final.mp4. In the same statement it copies the parent's
// segments (start, end, source text), glossary and burned-in subtitles
// (its plan's burn_subtitles), and records the parent's
// succeeded extract_audio and asr as the child's (InheritedWorker), so that
// the child's translate, tts and mux_video run as for any task. A parent
// that does not exist returns ErrNotFound.
func Spawn(parent Ref, language string) Transition {
	id := wire.ChildTaskID(parent.ID, language)
	keys := wire.DefaultKeys(id)
	ref := Ref{ID: id, Step: parent.Step, Trace: parent.Trace}
	data, _ := json.Marshal(map[string]string{"parent_task_id": parent.ID.String(), "target_language": language})
	ev := newEvent(ref, wire.EventTaskQueued, Queued, func(e *wire.Event) { e.Data = data })
	args := map[string]any{"id": id, "parent": parent.ID, "target_language": language,
		"source_video_key": keys.SourceVideo, "output_video_key": keys.OutputVideo,
		"inherited_steps": []string{wire.StepExtractAudio, wire.StepASR}, "worker": InheritedWorker(parent.ID)}
	t := Transition{Name: "spawn", TaskID: id, Event: ev}
	t.SQL, t.Args = positional(spawnSQL, withEvent(args, ref, ev))
	return t
}

// spawnSQL makes a child's row and what it starts with. Its first column
// reads the child's row as it was before the statement (NULL when made
// now); the parent missing makes nothing and reads NULL twice (ErrNotFound).
var spawnSQL = `WITH parent AS (
	SELECT id, source_language, speaker_id, trace_id, project, source_file_name, source_probe FROM tasks WHERE id = @parent
), created AS (
	INSERT INTO tasks (id, status, source_language, target_language, speaker_id, source_video_key,
	                   output_video_key, trace_id, project, parent_task_id, source_file_name, source_probe)
	SELECT @id, 'queued', p.source_language, @target_language, p.speaker_id, @source_video_key,
	       @output_video_key, p.trace_id, p.project, p.id, p.source_file_name, p.source_probe
	  FROM parent p
	ON CONFLICT DO NOTHING
	RETURNING id, status, trace_id
), ` + segment.InheritCTE + `, glossary AS (
	INSERT INTO task_glossaries (task_id, terms)
	SELECT c.id, g.terms FROM created c JOIN task_glossaries g ON g.task_id = @parent
), plan AS (
	INSERT INTO task_plans (task_id, burn_subtitles)
	SELECT c.id, p.burn_subtitles FROM created c JOIN task_plans p ON p.task_id = @parent WHERE p.burn_subtitles <> ''
), ` + attempt.InheritCTE + `
)` + createdEventTail
