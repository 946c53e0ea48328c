package history

import (
	"net/http"

	"github.com/dubflow/dubflow/services/console/internal/route"
)

// Route is GET /api/metrics/history, read by h (Read); fail answers an
// error.
func (h Reader) Route(fail route.Fail) route.Route {
	return route.Route{Method: "GET", Path: "/api/metrics/history", Access: route.Reader,
		Handle: func(w http.ResponseWriter, r *http.Request) {
			out, err := h.Read(r.Context(), r.URL.Query(), route.ProjectOf(r))
			if err != nil {
				fail(w, r, err)
				return
			}
			route.JSON(w, http.StatusOK, out)
		}}
}
