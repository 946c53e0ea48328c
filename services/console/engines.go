package main

import (
	"net/http"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/engines"
)

// listEngines answers GET /api/engines?step= (engines.List).
func (s *server) listEngines(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	list, err := engines.List(r.Context(), s.pool, r.URL.Query().Get("step"), now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"engines": list, "checkedAt": now.UTC()})
}
