// Package deadletters is the routes of what failed for good and waits for
// an operator: the dead letters (list, show, replay one, and replay or
// purge every one a filter matches: pkg/dlq, which dubctl calls too) and
// the tasks waiting for their missing speech, re-driven as tts_requeue
// does (pkg/compensation).
package deadletters

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Room serves the dead letters' and the compensations' routes.
type Room struct {
	Pool *pgxpool.Pool
	// Pub publishes what a replay or a requeue committed (a failed publish
	// is left to the outbox sweep).
	Pub  outbox.Publisher
	Log  zerolog.Logger
	Fail route.Fail
}

// Routes are /api/dead-letters... and /api/compensations...; the replays,
// the purge and the requeue are audited.
func (s Room) Routes() []route.Route {
	return []route.Route{
		{Method: "GET", Path: "/api/dead-letters", Access: route.Reader, Handle: s.listDeadLetters},
		{Method: "GET", Path: "/api/dead-letters/{id}", Access: route.Reader, Handle: s.getDeadLetter},
		{Method: "POST", Path: "/api/dead-letters/{id}/replay", Access: route.Admin, Audit: "replay", Handle: s.replayDeadLetter},
		{Method: "POST", Path: "/api/dead-letters/replay", Access: route.Admin, Audit: "replay", Handle: s.replayDeadLetters},
		{Method: "POST", Path: "/api/dead-letters/purge", Access: route.Admin, Audit: "purge", Handle: s.purgeDeadLetters},
		{Method: "GET", Path: "/api/compensations", Access: route.Reader, Handle: s.listCompensations},
		{Method: "POST", Path: "/api/compensations/requeue", Access: route.Admin, Audit: "requeue", Handle: s.requeueCompensations},
	}
}

// listDeadLetters answers view.DeadLetters: ?step=&pending=true&since=2h&limit=100.
func (s Room) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := view.DeadLetterFilter{Step: q.Get("step"), Pending: q.Get("pending") == "true", Project: route.ProjectOf(r)}
	if f.Step != "" && wire.RoutingKey(f.Step) == "" {
		s.Fail(w, r, apierr.BadRequest(fmt.Sprintf("step %q: want one of %v", f.Step, wire.Pipeline)))
		return
	}
	since, err := dlq.ParseSince(q.Get("since"), time.Now())
	if err != nil {
		s.Fail(w, r, apierr.BadRequest(err.Error()))
		return
	}
	f.Since = since
	if f.Limit, err = route.Limit(r, 100, 1000); err != nil {
		s.Fail(w, r, err)
		return
	}
	out, err := view.DeadLetters(r.Context(), s.Pool, f)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, map[string]any{"deadLetters": out})
}

func deadLetterID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, apierr.BadRequest(fmt.Sprintf("dead letter id %q: want a positive number", r.PathValue("id")))
	}
	return id, nil
}

func (s Room) getDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := deadLetterID(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	d, err := view.GetDeadLetter(r.Context(), s.Pool, id)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, d)
}

// replayDeadLetter answers dlq.Replay ({"force": true} replays again).
func (s Room) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := deadLetterID(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	var body struct {
		Force bool `json:"force"`
	}
	if err := jsonbody.Decode(r, &body); err != nil {
		s.Fail(w, r, err)
		return
	}
	res, err := dlq.Replay(r.Context(), s.Pool, s.Pub, id, dlq.Options{Force: body.Force})
	if err != nil && res.Attempt == 0 {
		s.Fail(w, r, err)
		return
	}
	if err != nil {
		s.Log.Warn().Err(err).Int64("dead_letter", id).Msg("replayed; publish deferred to the outbox sweep")
	}
	route.JSON(w, http.StatusOK, res)
}
