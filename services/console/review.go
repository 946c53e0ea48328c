package main

import (
	"cmp"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/jackc/pgx/v5"
)

// The review of a task's lines before the voice is made (pkg/dub's review
// operations, view.ReviewOf): the page's editable line table and dubctl
// review call these routes. Edits and approvals are audited (review,
// approve) with what they changed.

// reviewRoutes are the routes under /api/tasks/{id}/review.
func (s *server) reviewRoutes() []route {
	return []route{
		{"GET", "/api/tasks/{id}/review", reader, s.getReview},
		{"GET", "/api/tasks/{id}/review/audio", reader, s.reviewAudio},
		{"POST", "/api/tasks/{id}/review/edit", admin, s.audited("review", s.editReview)},
		{"POST", "/api/tasks/{id}/review/approve", admin, s.audited("approve", s.approveReview)},
		{"GET", "/api/tasks/{id}/review/export", reader, s.exportReview},
		{"POST", "/api/tasks/{id}/review/import", admin, s.audited("review", s.importReview)},
	}
}

// exportReview answers GET /api/tasks/{id}/review/export?format=srt|vtt&
// text=source|target: the lines as a subtitle file (dub.ExportLines).
func (s *server) exportReview(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f := subtitle.SRT
	if r.URL.Query().Get("format") == string(subtitle.WebVTT) {
		f = subtitle.WebVTT
	}
	text := r.URL.Query().Get("text")
	b, err := dub.ExportLines(r.Context(), s.pool, id, f, text)
	if errors.Is(err, dub.ErrNoTranslation) {
		err = apierr.Conflict(err.Error())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := fmt.Sprintf("%s.%s.%s", id, cmp.Or(text, "lines"), f.Ext())
	w.Header().Set("Content-Type", f.ContentType()+"; charset=utf-8")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// importBody is what POST /api/tasks/{id}/review/import reads: a subtitle
// file's text and which text of the lines it holds.
type importBody struct {
	Text      string `json:"text"`
	Subtitles string `json:"subtitles"`
}

// importReview answers POST /api/tasks/{id}/review/import:
// dub.ImportLines by the request's principal, audited as a review edit.
func (s *server) importReview(w http.ResponseWriter, r *http.Request) {
	var body importBody
	id, err := taskIDAndBody(r, &body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ed, err := dub.ImportLines(r.Context(), s.pool, id, principalOf(r).Name, cmp.Or(body.Text, dub.TextSource),
		[]byte(body.Subtitles))
	if err != nil {
		s.fail(w, r, reviewError(err))
		return
	}
	noteEdit(r, ed.Edit)
	writeJSON(w, http.StatusOK, ed)
}

// getReview answers GET /api/tasks/{id}/review: view.ReviewOf.
func (s *server) getReview(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rv, err := view.ReviewOf(r.Context(), s.pool, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rv)
}

// editReview answers POST /api/tasks/{id}/review/edit: dub.EditReview by
// the request's principal; the audit entry's detail holds the edit.
func (s *server) editReview(w http.ResponseWriter, r *http.Request) {
	var body dub.LineEdit
	id, err := taskIDAndBody(r, &body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ed, err := dub.EditReview(r.Context(), s.pool, id, principalOf(r).Name, body)
	if err != nil {
		s.fail(w, r, reviewError(err))
		return
	}
	noteEdit(r, ed.Edit)
	writeJSON(w, http.StatusOK, ed)
}

// noteEdit adds a review edit to the request's audit entry.
func noteEdit(r *http.Request, e view.ReviewEdit) {
	auditlog.Note(r, "action", e.Action)
	auditlog.Note(r, "stage", e.Stage)
	auditlog.Note(r, "line", e.Line)
	auditlog.Note(r, "before", e.Before)
	auditlog.Note(r, "after", e.After)
}

// approveReview answers POST /api/tasks/{id}/review/approve: dub.Approve,
// then the committed messages are published.
func (s *server) approveReview(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	id, err := taskIDAndBody(r, &body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	batch, err := setting.IntOf(r.Context(), s.pool, setting.TranslateBatchSize, s.cfg.TranslateBatchSize)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var a *dub.Approved
	err = s.commit(r.Context(), id, func(tx pgx.Tx) ([]int64, error) {
		var err error
		if a, err = dub.Approve(r.Context(), tx, id, principalOf(r).Name, batch); err != nil {
			return nil, err
		}
		return a.Outbox, nil
	})
	if err != nil {
		s.fail(w, r, reviewError(err))
		return
	}
	auditlog.Note(r, "stage", a.Stage)
	auditlog.Note(r, "lines", a.Lines)
	writeJSON(w, http.StatusAccepted, a)
}

// reviewError is the API's answer to a review operation's refusal.
func reviewError(err error) error {
	switch {
	case errors.Is(err, dub.ErrNoSegment), errors.Is(err, dub.ErrInvalidText), errors.Is(err, dub.ErrInvalidLine):
		return apierr.BadRequest(err.Error())
	case errors.Is(err, dub.ErrNotInReview), errors.Is(err, dub.ErrNoLines):
		return apierr.Conflict(err.Error())
	}
	return err
}

// reviewAudio answers GET /api/tasks/{id}/review/audio?line=N: the part of
// the task's extracted audio from the line's start to its end, as a WAV
// file of its own, read from the store by a seek to it.
func (s *server) reviewAudio(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, _ := strconv.Atoi(r.URL.Query().Get("line")) // the contract checked a value given: an integer ≥ 1
	if n < 1 {
		s.fail(w, r, apierr.BadRequest("line: required, the line numbered from 1 (?line=1)"))
		return
	}
	lines, err := view.ReviewLines(r.Context(), s.pool, id)
	if err == nil && len(lines) == 0 {
		var ok bool
		if ok, err = view.TaskExists(r.Context(), s.pool, id); err == nil && !ok {
			err = fmt.Errorf("task %s: %w", id, view.ErrNotFound)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if n > len(lines) {
		s.fail(w, r, apierr.BadRequest(fmt.Sprintf("line %d: the task has %d lines, numbered from 1", n, len(lines))))
		return
	}
	s.serveClip(w, r, wire.DefaultKeys(id).SourceAudio, lines[n-1])
}

// serveClip answers the part of the WAV object key that line l spans.
func (s *server) serveClip(w http.ResponseWriter, r *http.Request, key string, l view.ReviewLine) {
	obj, _, err := s.objects.Open(r.Context(), key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		s.fail(w, r, apierr.NotFound("this task has no extracted audio (yet)"))
		return
	case err != nil:
		s.log.Warn().Err(err).Str("key", key).Msg("open the extracted audio")
		s.fail(w, r, apierr.Unavailable("object store: the audio cannot be read now"))
		return
	}
	defer obj.Close()
	w.Header().Set("Content-Type", "audio/wav")
	w.Header().Set("Cache-Control", "no-store")
	cw := &countingWriter{w: w}
	from, to := time.Duration(l.StartMS)*time.Millisecond, time.Duration(l.EndMS)*time.Millisecond
	if err := media.WriteWAVClip(cw, obj, from, to); err != nil {
		s.log.Warn().Err(err).Str("key", key).Int("line", l.N).Msg("serve a line's audio")
		if cw.n == 0 {
			w.Header().Del("Content-Type")
			s.fail(w, r, apierr.Unavailable("the line's audio cannot be read now"))
		}
	}
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
