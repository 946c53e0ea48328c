package gate

import (
	"errors"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// Classify maps an error of the shared packages to what the API answers;
// anything unknown is an internal error whose detail stays in the log.
func Classify(err error) *apierr.Error {
	if ae, ok := apierr.As(err); ok {
		return ae
	}
	switch {
	case errors.Is(err, task.ErrNotFound), errors.Is(err, dlq.ErrNotFound), errors.Is(err, view.ErrNotFound),
		errors.Is(err, dub.ErrNotFound):
		return &apierr.Error{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	case errors.Is(err, task.ErrRefused), errors.Is(err, dlq.ErrReplayed), errors.Is(err, dlq.ErrTaskDone),
		errors.Is(err, dlq.ErrNotReplayable):
		return &apierr.Error{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	}
	return &apierr.Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
}

// Fail answers err, logging internal errors with their detail. The
// message repeats no value of the client's whole (apierr.CapEchoes).
func (g Gate) Fail(w http.ResponseWriter, r *http.Request, err error) {
	ae := *Classify(err)
	if ae.Status >= 500 {
		g.Log.Error().Err(err).Str("method", r.Method).Str("path", apierr.CutEcho(r.URL.Path)).Msg("request failed")
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dubflow"`)
	}
	// No scratch path of the console's own (an upload's temporary file) or
	// Go struct name reaches the client, whichever package wrote the text.
	ae.Message = apierr.CapEchoes(wire.ErrorText(ae.Message))
	route.JSON(w, ae.Status, &ae)
}

// refuse answers a refused request with err and counts it in the audit
// (internal/auditlog's Refusals: refused requests are audited aggregated).
func (g Gate) refuse(w http.ResponseWriter, r *http.Request, rt route.Route, p auth.Principal, err error) {
	ae := Classify(err)
	g.Audit.Refused.Note(auditlog.Refusal{Actor: p.Name, Role: p.Role, Target: rt.Method + " " + rt.Path,
		Outcome: ae.Code + ": " + apierr.CapEchoes(ae.Message), Status: ae.Status}, time.Now(), apierr.CutEcho(r.URL.Path))
	g.Fail(w, r, err)
}
