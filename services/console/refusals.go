package main

import (
	"net/http"
	"strings"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/auditlog"
)

// Refused requests are audited aggregated (internal/auditlog's Refusals).

// refuse answers a refused request with err and counts it in the audit.
func (s *server) refuse(w http.ResponseWriter, r *http.Request, rt route, p principal, err error) {
	ae := classify(err)
	s.refused.Note(auditlog.Refusal{Actor: p.Name, Role: p.Role, Target: rt.method + " " + rt.path,
		Outcome: ae.Code + ": " + capEchoes(ae.Message), Status: ae.Status}, time.Now(), cutEcho(r.URL.Path))
	s.fail(w, r, err)
}

// cutEcho keeps at most maxEcho bytes of a path the client sent, as
// valid UTF-8.
func cutEcho(p string) string {
	if len(p) > maxEcho {
		p = p[:maxEcho]
	}
	return strings.ToValidUTF8(p, "")
}
