package main

import (
	"errors"
	"net/http"

	"github.com/dubflow/dubflow/pkg/dub"
)

// redubTask changes the translation of one segment (numbered from 1) of a
// done task and starts the task's next output version (dub.Redub): only
// that segment is synthesized again and the video assembled again; the
// earlier version stays. A parent task is refused (409) with the names of
// its children, an empty text with 400.
func (s *server) redubTask(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Segment int    `json:"segment"`
		Text    string `json:"text"`
	}
	id, err := taskIDAndBody(r, &body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := dub.Redub(r.Context(), s.pool, id, body.Segment, body.Text)
	switch {
	case errors.Is(err, dub.ErrNotFound):
		err = notFound(err.Error())
	case errors.Is(err, dub.ErrNoSegment), errors.Is(err, dub.ErrInvalidText):
		err = badRequest(err.Error())
	case errors.Is(err, dub.ErrParent):
		err = conflict(err.Error())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.flush(r.Context(), id, res.Outbox)
	writeJSON(w, http.StatusAccepted, res)
}
