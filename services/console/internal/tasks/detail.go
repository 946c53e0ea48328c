package tasks

import (
	"context"
	"net/http"
	"path"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// The task's read endpoints answer the read model (pkg/view), which dubctl
// prints too: one set of shapes, loaded in one place.

// requestedDetail loads the detail of the task named by the {id} path
// value (view.Load); it answers the error itself and returns false on
// failure.
func (s Room) requestedDetail(w http.ResponseWriter, r *http.Request) (*view.Task, bool) {
	id, err := route.TaskID(r)
	var d *view.Task
	if err == nil {
		d, err = view.Load(r.Context(), s.Pool, id)
	}
	if err != nil {
		s.Fail(w, r, err)
		return nil, false
	}
	return d, true
}

// getTask answers the task's detail with presigned links and its timing
// report.
func (s Room) getTask(w http.ResponseWriter, r *http.Request) {
	d, ok := s.requestedDetail(w, r)
	if !ok {
		return
	}
	s.linksOf(r.Context(), d)
	view.ReadTimingReport(r.Context(), s.Objects, d)
	if d.Stream != nil && d.Stream.PlaylistKey != "" {
		d.Stream.URL = "/api/tasks/" + d.TaskID.String() + StreamPath
	}
	route.JSON(w, http.StatusOK, d)
}

// linksOf presigns the task's source and, once dubbed, its outputs, and
// those of each of its children that is done (view.SignLinks, which
// dubctl's database mode calls with the same settings).
func (s Room) linksOf(ctx context.Context, d *view.Task) {
	if err := view.SignLinks(ctx, s.Signer, d, s.LinkExpiry); err != nil {
		s.Log.Warn().Err(err).Str("task_id", d.TaskID.String()).Msg("presign")
	}
}

// Link returns a download link for key, nil for no key.
func (s Room) Link(ctx context.Context, key string) *string {
	if key == "" {
		return nil
	}
	u, err := s.Signer.PresignGet(ctx, key, s.LinkExpiry, path.Base(key))
	if err != nil {
		s.Log.Warn().Err(err).Str("key", key).Msg("presign")
		return nil
	}
	v := u.String()
	return &v
}
