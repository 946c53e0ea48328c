package task

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

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

func list(statuses []string) string {
	q := make([]string, len(statuses))
	for i, s := range statuses {
		q[i] = quote(s)
	}
	return strings.Join(q, ", ")
}

func quote(s string) string { return "'" + s + "'" }
