package main

import (
	"net/http"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
)

// Refused requests are audited aggregated (internal/auditlog's Refusals).

// refuse answers a refused request with err and counts it in the audit.
func (s *server) refuse(w http.ResponseWriter, r *http.Request, rt route, p principal, err error) {
	ae := classify(err)
	s.refused.Note(auditlog.Refusal{Actor: p.Name, Role: p.Role, Target: rt.method + " " + rt.path,
		Outcome: ae.Code + ": " + apierr.CapEchoes(ae.Message), Status: ae.Status}, time.Now(), apierr.CutEcho(r.URL.Path))
	s.fail(w, r, err)
}
