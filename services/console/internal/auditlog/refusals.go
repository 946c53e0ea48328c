package auditlog

import (
	"context"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/ops"
)

// Refused requests (a bad or missing token, a logged-out session, a
// read-only token trying a write, a CSRF failure, a login past its rate
// limit) are audited aggregated, so that a flood of them cannot grow
// console_audit without bound: they are counted in memory by who (the
// token's name, "" when unknown), what (the route) and why (the answer's
// code and message), and written every refusalFlush as one row per such
// key (action "refused", detail {count, first, last, path}). At most
// maxRefusalKeys keys are kept per window; the rest are counted under one
// key whose target is "*". Refused rows older than refusalRetention are
// deleted at each flush.
const (
	refusalFlush     = time.Minute
	maxRefusalKeys   = 50
	refusalRetention = 30 * 24 * time.Hour
	// ActionRefused is the action of the refused requests' rows.
	ActionRefused = "refused"
)

// Refusal is what refused requests are counted by: who (the token's name
// and role, "" when unknown), what (the route, "METHOD /path") and why (the
// answer's "code: message" and status).
type Refusal struct {
	Actor, Role, Target, Outcome string
	Status                       int
}

// refusalCount is how many refused requests a key counts, when the
// first and the last came, and the path of the first.
type refusalCount struct {
	n           int
	first, last time.Time
	path        string
}

// Refusals counts refused requests until the next flush. The zero value
// is ready.
type Refusals struct {
	mu     sync.Mutex
	counts map[Refusal]*refusalCount
}

// Note counts one refused request of k at at, of path (the first one's
// is written).
func (rs *Refusals) Note(k Refusal, at time.Time, path string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.counts == nil {
		rs.counts = map[Refusal]*refusalCount{}
	}
	c := rs.counts[k]
	if c == nil && len(rs.counts) >= maxRefusalKeys {
		k = Refusal{Target: "*", Outcome: "more refused requests than keys kept", Status: k.Status}
		c = rs.counts[k]
	}
	if c == nil {
		c = &refusalCount{first: at, path: path}
		rs.counts[k] = c
	}
	c.n++
	c.last = at
}

// take returns the counts and starts a new window.
func (rs *Refusals) take() map[Refusal]*refusalCount {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := rs.counts
	rs.counts = nil
	return out
}

// FlushRefusals writes the counted refused requests to console_audit, one
// row per key, and deletes refused rows past refusalRetention. Counts that
// cannot be written are logged and dropped (the audit of refusals is
// best-effort; the requests were refused either way).
func (l Log) FlushRefusals(ctx context.Context) {
	for k, c := range l.Refused.take() {
		detail := map[string]any{"count": c.n, "first": c.first.UTC(), "last": c.last.UTC(), "path": c.path}
		l.Record(ctx, audit.Entry{At: c.first, Actor: k.Actor, Role: k.Role, Action: ActionRefused,
			Target: k.Target, Outcome: k.Outcome, Status: k.Status, Detail: detail})
	}
	if _, err := l.Pool.Exec(ctx, `DELETE FROM console_audit WHERE action = $1 AND at < now() - $2::interval`,
		ActionRefused, refusalRetention); err != nil {
		l.Log.Warn().Err(err).Msg("prune refused requests from the audit")
	}
}

// RefusalLoop flushes the refused requests every refusalFlush, and once
// more when ctx ends.
func (l Log) RefusalLoop(ctx context.Context) error {
	ops.Every(ctx, refusalFlush, l.FlushRefusals)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	l.FlushRefusals(fctx)
	return nil
}
