package task

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Event names of the task lifecycle, published under "event.<name>".
const (
	EventQueued       = wire.EventTaskQueued
	EventStarted      = wire.EventTaskStarted
	EventCompensating = wire.EventTaskCompensating
	EventResumed      = wire.EventTaskResumed
	EventSucceeded    = wire.EventTaskSucceeded
	EventFailed       = wire.EventTaskFailed
	EventCancelled    = wire.EventTaskCancelled
	EventRetried      = wire.EventTaskRetried
	EventRedubbing    = wire.EventTaskRedubbing
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
}

// Create makes the task's row, queued, and announces task.queued. A task
// that exists already is kept as it is (Result.Changed is false).
func Create(d Details) Transition {
	args := detailArgs(d)
	ref := Ref{ID: d.ID, Trace: d.TraceID}
	ev := newEvent(ref, EventQueued, Queued, nil)
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
	t := Transition{Name: "settle", TaskID: d.ID}
	t.SQL, t.Args = positional(settleSQL, args)
	return t
}

// Start records that a step of the task succeeded: a queued task becomes
// running (task.started), a running one only moves its updated_at. A task
// that is compensating, done or failed is kept: a late part of a failed
// task is recorded in task_steps, not here.
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
	reason = wire.CleanText(reason)
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
// the task's output key.
func Succeed(ref Ref, result json.RawMessage, outputVideoKey string) Transition {
	if len(result) == 0 {
		result = json.RawMessage(`{}`)
	}
	return succeed.transition(ref, map[string]any{"result": []byte(result), "output_video_key": outputVideoKey},
		func(e *wire.Event) { e.OutputVideoKey, e.Data = outputVideoKey, result })
}

// Fail sets a task failed for reason (task.failed, naming ref.Step): a
// step's part failed for good, or nobody moved the task on in time. The
// reason is stored as given (the step runtime and the dead-letter recorder
// write "<step>: <why>"). A task that is done is kept, and so is a task
// whose failing part (ref.Step, part) has succeeded since: a stale dead
// letter of a duplicate. A task failed already keeps its first error and
// is not announced again.
func Fail(ref Ref, part, reason string) Transition {
	reason = wire.CleanText(reason)
	return fail.transition(ref, map[string]any{"error": reason, "step": ref.Step, "part": part},
		func(e *wire.Event) { e.Error = wire.Reason(reason) })
}

// Cancel ends a task that is not finished: it becomes failed with the
// error "cancelled: <reason>" (task.cancelled). A task done or failed
// already is refused.
func Cancel(ref Ref, reason string) Transition {
	reason = "cancelled: " + wire.CleanText(reason)
	return cancel.transition(ref, map[string]any{"error": reason},
		func(e *wire.Event) { e.Error = wire.Reason(reason) })
}

// Retry sets a failed (or still queued) task running again with its error
// cleared (task.retried): an operator replays a step. A task running or
// compensating is kept; a task done is refused.
func Retry(ref Ref) Transition {
	return retry.transition(ref, nil, nil)
}

// Redub sets a done task running again (task.redubbing): an operator
// re-dubs part of it. Any other status is refused.
func Redub(ref Ref) Transition {
	return redub.transition(ref, nil, nil)
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
		keep: []string{Compensating, Done, Failed}, event: EventStarted})
	touch      = newRule(rule{name: "touch", from: []string{Queued, Running, Compensating}})
	compensate = newRule(rule{name: "compensate", from: []string{Running, Compensating}, to: Compensating,
		set: "error = @error", event: EventCompensating})
	resume = newRule(rule{name: "resume", from: []string{Compensating, Running}, to: Running,
		set: "error = ''", event: EventResumed})
	succeed = newRule(rule{name: "succeed", from: []string{Running}, to: Done,
		set: "error = '', result = @result::jsonb, " +
			"output_video_key = CASE WHEN @output_video_key = '' THEN t.output_video_key ELSE @output_video_key END",
		event: EventSucceeded, concludes: true})
	fail = newRule(rule{name: "fail", from: []string{Queued, Running, Compensating, Failed}, to: Failed,
		keep: []string{Done},
		set:  "error = CASE WHEN old.status = 'failed' AND t.error <> '' THEN t.error ELSE @error END",
		guard: `(@step = '' OR NOT EXISTS (SELECT 1 FROM task_steps s WHERE s.task_id = old.id
			AND s.step = @step AND s.part = @part AND s.status = 'succeeded'))`,
		event: EventFailed, concludes: true})
	cancel = newRule(rule{name: "cancel", from: []string{Queued, Running, Compensating}, to: Failed,
		set: "error = @error", event: EventCancelled, concludes: true, cascade: cancelChildrenSQL})
	retry = newRule(rule{name: "retry", from: []string{Failed, Queued}, to: Running,
		keep: []string{Running, Compensating}, set: "error = ''", event: EventRetried})
	redub = newRule(rule{name: "redub", from: []string{Done}, to: Running, set: "error = ''", event: EventRedubbing})
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
	INSERT INTO outbox (message_id, exchange, routing_key, body)
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

// positional returns sql with its named arguments (@name) numbered and
// named's values in that order, as pgx.StrictNamedArgs would rewrite them
// on every execution; the numbering of each statement is worked out once
// (positionals). When named does not match the statement's names it
// returns them unchanged, for pgx to report the mismatch when the
// statement runs.
func positional(sql string, named pgx.StrictNamedArgs) (string, []any) {
	p, ok := positionals.Load(sql)
	if !ok {
		probe := make(pgx.StrictNamedArgs, len(named))
		for name := range named {
			probe[name] = argName(name)
		}
		numbered, order, err := probe.RewriteQuery(context.Background(), nil, sql, nil)
		if err != nil {
			return sql, []any{named}
		}
		names := make([]string, len(order))
		for i, o := range order {
			names[i] = string(o.(argName))
		}
		p, _ = positionals.LoadOrStore(sql, &numberedSQL{sql: numbered, names: names})
	}
	n := p.(*numberedSQL)
	if len(n.names) != len(named) {
		return sql, []any{named}
	}
	args := make([]any, len(n.names))
	for i, name := range n.names {
		v, ok := named[name]
		if !ok {
			return sql, []any{named}
		}
		args[i] = v
	}
	return n.sql, args
}

// numberedSQL is a statement with its named arguments numbered, and the
// names in the order of their numbers.
type numberedSQL struct {
	sql   string
	names []string
}

// argName marks an argument's place while a statement is numbered.
type argName string

// positionals holds the numbered form of each statement (*numberedSQL by
// its SQL with named arguments).
var positionals sync.Map

// eventBody is the SQL of the event's body: the one built in Go, with the
// trace id of the task's row (from source) when the caller had none.
func eventBody(source string) string {
	return fmt.Sprintf(`CASE WHEN @trace = '' AND %[1]s.trace_id <> ''
	       THEN convert_to(jsonb_set(convert_from(@body::bytea, 'UTF8')::jsonb, '{trace_id}', to_jsonb(%[1]s.trace_id))::text, 'UTF8')
	       ELSE @body::bytea END`, source)
}

// newEvent builds the event of a transition to status.
func newEvent(ref Ref, name, status string, edit func(*wire.Event)) *outbox.Message {
	e := &wire.Event{EventID: uuid.New(), Event: name, TaskID: ref.ID, Status: status, Step: ref.Step,
		OccurredAt: time.Now().UTC(), TraceID: ref.Trace}
	if edit != nil {
		edit(e)
	}
	body, err := e.Marshal()
	if err != nil {
		// Only an unencodable Data could fail, and Data is JSON already.
		body = []byte(fmt.Sprintf(`{"event_id":%q,"event":%q,"task_id":%q,"status":%q,"occurred_at":%q}`,
			e.EventID, name, ref.ID, status, e.OccurredAt.Format(time.RFC3339Nano)))
	}
	// The body carries the event's id: no need to read it back (outbox.New).
	return &outbox.Message{MessageID: e.EventID, Exchange: wire.Exchange, RoutingKey: e.RoutingKey(), Body: body}
}

// withEvent returns args with the event's named arguments added.
func withEvent(args map[string]any, ref Ref, ev *outbox.Message) pgx.StrictNamedArgs {
	named := pgx.StrictNamedArgs{"message_id": ev.MessageID, "exchange": ev.Exchange,
		"routing_key": ev.RoutingKey, "body": ev.Body, "trace": ref.Trace}
	for k, v := range args {
		named[k] = v
	}
	return named
}

func detailArgs(d Details) map[string]any {
	targets := d.Targets
	if targets == nil {
		targets = []string{}
	}
	return map[string]any{"id": d.ID, "source_language": d.SourceLanguage, "target_language": d.TargetLanguage,
		"speaker_id": d.SpeakerID, "source_video_key": d.SourceVideoKey, "output_video_key": d.OutputVideoKey,
		"trace_id": d.TraceID, "targets": targets}
}

// createSQL inserts the row unless it exists. Its first column reads the
// row as it was before the statement: NULL when the insert made it.
var createSQL = `WITH created AS (
	INSERT INTO tasks (id, status, source_language, target_language, speaker_id, source_video_key,
	                   output_video_key, trace_id, targets)
	VALUES (@id, 'queued', @source_language, @target_language, @speaker_id, @source_video_key,
	        @output_video_key, @trace_id, @targets::text[])
	ON CONFLICT (id) DO NOTHING
	RETURNING status, trace_id
)` + createdEventTail

// createdEventTail ends a statement whose CTE "created" inserted a task
// row (RETURNING status, trace_id): it adds the task's event.task.created
// to the outbox and reads the status before, the status after and the
// outbox row, the three columns Transition.Scan expects.
var createdEventTail = `, event AS (
	INSERT INTO outbox (message_id, exchange, routing_key, body)
	SELECT @message_id, @exchange, @routing_key, ` + eventBody("created") + `
	  FROM created
	RETURNING id
)
SELECT (SELECT status FROM tasks WHERE id = @id), (SELECT status FROM created), (SELECT id FROM event)`

// settleSQL records the settled details; the status is not touched.
const settleSQL = `INSERT INTO tasks AS t (id, source_language, target_language, speaker_id, source_video_key,
	                   output_video_key, trace_id, project, targets)
	VALUES (@id, @source_language, @target_language, @speaker_id, @source_video_key, @output_video_key, @trace_id,
	        @project, @targets::text[])
	ON CONFLICT (id) DO UPDATE SET source_language = EXCLUDED.source_language,
	    target_language = EXCLUDED.target_language, speaker_id = EXCLUDED.speaker_id,
	    source_video_key = EXCLUDED.source_video_key, output_video_key = EXCLUDED.output_video_key,
	    trace_id = CASE WHEN t.trace_id = '' THEN EXCLUDED.trace_id ELSE t.trace_id END,
	    project = CASE WHEN EXCLUDED.project = '' THEN t.project ELSE EXCLUDED.project END,
	    targets = CASE WHEN cardinality(EXCLUDED.targets) = 0 THEN t.targets ELSE EXCLUDED.targets END,
	    updated_at = now()
	RETURNING t.status, t.status, NULL::bigint`

func list(statuses []string) string {
	q := make([]string, len(statuses))
	for i, s := range statuses {
		q[i] = quote(s)
	}
	return strings.Join(q, ", ")
}

func quote(s string) string { return "'" + s + "'" }
