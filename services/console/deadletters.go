package main

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
)

// deadLetterView is a dead letter in the API's field names (the read
// model's).
type deadLetterView = view.DeadLetter

// listDeadLetters answers view.DeadLetters: ?step=&pending=true&since=2h&limit=100.
func (s *server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := view.DeadLetterFilter{Step: q.Get("step"), Pending: q.Get("pending") == "true", Project: projectOf(r)}
	if f.Step != "" && wire.RoutingKey(f.Step) == "" {
		s.fail(w, r, apierr.BadRequest(fmt.Sprintf("step %q: want one of %v", f.Step, wire.Pipeline)))
		return
	}
	since, err := dlq.ParseSince(q.Get("since"), time.Now())
	if err != nil {
		s.fail(w, r, apierr.BadRequest(err.Error()))
		return
	}
	f.Since = since
	if f.Limit, err = queryLimit(r, 100, 1000); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := view.DeadLetters(r.Context(), s.pool, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deadLetters": out})
}

func deadLetterID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, apierr.BadRequest(fmt.Sprintf("dead letter id %q: want a positive number", r.PathValue("id")))
	}
	return id, nil
}

func (s *server) getDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := deadLetterID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := view.GetDeadLetter(r.Context(), s.pool, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// replayDeadLetter answers dlq.Replay ({"force": true} replays again).
func (s *server) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := deadLetterID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var body struct {
		Force bool `json:"force"`
	}
	if err := jsonbody.Decode(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := dlq.Replay(r.Context(), s.pool, s.pub, id, dlq.Options{Force: body.Force})
	if err != nil && res.Attempt == 0 {
		s.fail(w, r, err)
		return
	}
	if err != nil {
		s.log.Warn().Err(err).Int64("dead_letter", id).Msg("replayed; publish deferred to the outbox sweep")
	}
	writeJSON(w, http.StatusOK, res)
}
