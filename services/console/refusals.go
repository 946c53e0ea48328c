package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

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
	actionRefused    = "refused"
)

// refusalKey is what refused requests are counted by.
type refusalKey struct {
	actor, role, target, outcome string
	status                       int
}

// refusalCount is how many refused requests a key counts, when the
// first and the last came, and the path of the first.
type refusalCount struct {
	n           int
	first, last time.Time
	path        string
}

// refusals counts refused requests until the next flush. The zero value
// is ready.
type refusals struct {
	mu     sync.Mutex
	counts map[refusalKey]*refusalCount
}

// note counts one refused request of k at at.
func (rs *refusals) note(k refusalKey, at time.Time, path string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.counts == nil {
		rs.counts = map[refusalKey]*refusalCount{}
	}
	c := rs.counts[k]
	if c == nil && len(rs.counts) >= maxRefusalKeys {
		k = refusalKey{target: "*", outcome: "more refused requests than keys kept", status: k.status}
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
func (rs *refusals) take() map[refusalKey]*refusalCount {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := rs.counts
	rs.counts = nil
	return out
}

// refuse answers a refused request with err and counts it in the audit.
func (s *server) refuse(w http.ResponseWriter, r *http.Request, rt route, p principal, err error) {
	ae := classify(err)
	s.refused.note(refusalKey{actor: p.name, role: p.role, target: rt.method + " " + rt.path,
		outcome: ae.Code + ": " + capEchoes(ae.Message), status: ae.Status}, time.Now(), r.URL.Path)
	s.fail(w, r, err)
}

// flushRefusals writes the counted refused requests to console_audit, one
// row per key, and deletes refused rows past refusalRetention. Counts that
// cannot be written are logged and dropped (the audit of refusals is
// best-effort; the requests were refused either way).
func (s *server) flushRefusals(ctx context.Context) {
	for k, c := range s.refused.take() {
		detail := map[string]any{"count": c.n, "first": c.first.UTC(), "last": c.last.UTC(), "path": cutEcho(c.path)}
		s.recordAudit(ctx, auditEntry{At: c.first, Actor: k.actor, Role: k.role, Action: actionRefused,
			Target: k.target, Outcome: k.outcome, Status: k.status, Detail: detail})
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM console_audit WHERE action = $1 AND at < now() - $2::interval`,
		actionRefused, refusalRetention); err != nil {
		s.log.Warn().Err(err).Msg("prune refused requests from the audit")
	}
}

// refusalLoop flushes the refused requests every refusalFlush, and once
// more when ctx ends.
func (s *server) refusalLoop(ctx context.Context) error {
	ops.Every(ctx, refusalFlush, s.flushRefusals)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.flushRefusals(fctx)
	return nil
}

// cutEcho keeps at most maxEcho bytes of a path the client sent, as
// valid UTF-8.
func cutEcho(p string) string {
	if len(p) > maxEcho {
		p = p[:maxEcho]
	}
	return strings.ToValidUTF8(p, "")
}
