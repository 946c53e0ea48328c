package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/wire"
)

// listEngines answers GET /api/engines?step=: every engine of the steps'
// pools as the shared schedule (pkg/pool) sees it now — quota used and
// left in the window the engine last worked in, calls in flight, when it
// is available next, its errors and its breaker.
func (s *server) listEngines(w http.ResponseWriter, r *http.Request) {
	step := r.URL.Query().Get("step")
	if step != "" && pool.Kinds[step] == nil {
		s.fail(w, r, badRequest(fmt.Sprintf("step %q: want one of %s, %s, %s", step, wire.StepASR, wire.StepTranslate, wire.StepTTS)))
		return
	}
	now := time.Now()
	engines, err := pool.Read(r.Context(), s.pool, step, now, nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if engines == nil {
		engines = []pool.Status{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"engines": engines, "checkedAt": now.UTC()})
}
