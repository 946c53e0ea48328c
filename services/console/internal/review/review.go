// Package review is the routes of the review of a task's lines before the
// voice is made (pkg/dub's review operations, view.ReviewOf): the page's
// editable line table and dubctl review call them. Edits and approvals are
// audited (review, approve) with what they changed.
package review

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
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Room serves the review routes.
type Room struct {
	Pool *pgxpool.Pool
	// Objects holds the extracted audio a line's clip is cut from.
	Objects *blob.Store
	Log     zerolog.Logger
	// Commit commits an approval with its translate messages.
	Commit route.Committer
	// BatchSize is how many lines an approval puts in one translate
	// message when translate.batch_size is not set (TRANSLATE_BATCH_SIZE).
	BatchSize int
	Fail      route.Fail
}

// Routes are the routes under /api/tasks/{id}/review.
func (s Room) Routes() []route.Route {
	const at = "/api/tasks/{id}/review"
	return []route.Route{
		{Method: "GET", Path: at, Access: route.Reader, Handle: s.getReview},
		{Method: "GET", Path: at + "/audio", Access: route.Reader, Handle: s.reviewAudio},
		{Method: "POST", Path: at + "/edit", Access: route.Admin, Audit: "review", Handle: s.editReview},
		{Method: "POST", Path: at + "/approve", Access: route.Admin, Audit: "approve", Handle: s.approveReview},
		{Method: "GET", Path: at + "/export", Access: route.Reader, Handle: s.exportReview},
		{Method: "POST", Path: at + "/import", Access: route.Admin, Audit: "review", Handle: s.importReview},
	}
}

// exportReview answers GET /api/tasks/{id}/review/export?format=srt|vtt&
// text=source|target: the lines as a subtitle file (dub.ExportLines).
func (s Room) exportReview(w http.ResponseWriter, r *http.Request) {
	id, err := route.TaskID(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	f := subtitle.SRT
	if r.URL.Query().Get("format") == string(subtitle.WebVTT) {
		f = subtitle.WebVTT
	}
	text := r.URL.Query().Get("text")
	b, err := dub.ExportLines(r.Context(), s.Pool, id, f, text)
	if errors.Is(err, dub.ErrNoTranslation) {
		err = apierr.Conflict(err.Error())
	}
	if err != nil {
		s.Fail(w, r, err)
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
func (s Room) importReview(w http.ResponseWriter, r *http.Request) {
	var body importBody
	id, err := route.TaskIDAndBody(r, &body)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	ed, err := dub.ImportLines(r.Context(), s.Pool, id, route.PrincipalOf(r).Name, cmp.Or(body.Text, dub.TextSource),
		[]byte(body.Subtitles))
	if err != nil {
		s.Fail(w, r, reviewError(err))
		return
	}
	noteEdit(r, ed.Edit)
	route.JSON(w, http.StatusOK, ed)
}

// getReview answers GET /api/tasks/{id}/review: view.ReviewOf.
func (s Room) getReview(w http.ResponseWriter, r *http.Request) {
	id, err := route.TaskID(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	rv, err := view.ReviewOf(r.Context(), s.Pool, id)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, rv)
}

// editReview answers POST /api/tasks/{id}/review/edit: dub.EditReview by
// the request's principal; the audit entry's detail holds the edit.
func (s Room) editReview(w http.ResponseWriter, r *http.Request) {
	var body dub.LineEdit
	id, err := route.TaskIDAndBody(r, &body)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	ed, err := dub.EditReview(r.Context(), s.Pool, id, route.PrincipalOf(r).Name, body)
	if err != nil {
		s.Fail(w, r, reviewError(err))
		return
	}
	noteEdit(r, ed.Edit)
	route.JSON(w, http.StatusOK, ed)
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
func (s Room) approveReview(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	id, err := route.TaskIDAndBody(r, &body)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	batch, err := setting.IntOf(r.Context(), s.Pool, setting.TranslateBatchSize, s.BatchSize)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	var a *dub.Approved
	err = s.Commit.Commit(r.Context(), id, func(tx pgx.Tx) ([]int64, error) {
		var err error
		if a, err = dub.Approve(r.Context(), tx, id, route.PrincipalOf(r).Name, batch); err != nil {
			return nil, err
		}
		return a.Outbox, nil
	})
	if err != nil {
		s.Fail(w, r, reviewError(err))
		return
	}
	auditlog.Note(r, "stage", a.Stage)
	auditlog.Note(r, "lines", a.Lines)
	route.JSON(w, http.StatusAccepted, a)
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
func (s Room) reviewAudio(w http.ResponseWriter, r *http.Request) {
	id, err := route.TaskID(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	n, _ := strconv.Atoi(r.URL.Query().Get("line")) // the contract checked a value given: an integer ≥ 1
	if n < 1 {
		s.Fail(w, r, apierr.BadRequest("line: required, the line numbered from 1 (?line=1)"))
		return
	}
	lines, err := view.ReviewLines(r.Context(), s.Pool, id)
	if err == nil && len(lines) == 0 {
		var ok bool
		if ok, err = view.TaskExists(r.Context(), s.Pool, id); err == nil && !ok {
			err = fmt.Errorf("task %s: %w", id, view.ErrNotFound)
		}
	}
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	if n > len(lines) {
		s.Fail(w, r, apierr.BadRequest(fmt.Sprintf("line %d: the task has %d lines, numbered from 1", n, len(lines))))
		return
	}
	s.serveClip(w, r, wire.DefaultKeys(id).SourceAudio, lines[n-1])
}

// serveClip answers the part of the WAV object key that line l spans.
func (s Room) serveClip(w http.ResponseWriter, r *http.Request, key string, l view.ReviewLine) {
	obj, _, err := s.Objects.Open(r.Context(), key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		s.Fail(w, r, apierr.NotFound("this task has no extracted audio (yet)"))
		return
	case err != nil:
		s.Log.Warn().Err(err).Str("key", key).Msg("open the extracted audio")
		s.Fail(w, r, apierr.Unavailable("object store: the audio cannot be read now"))
		return
	}
	defer obj.Close()
	w.Header().Set("Content-Type", "audio/wav")
	w.Header().Set("Cache-Control", "no-store")
	cw := &countingWriter{w: w}
	from, to := time.Duration(l.StartMS)*time.Millisecond, time.Duration(l.EndMS)*time.Millisecond
	if err := media.WriteWAVClip(cw, obj, from, to); err != nil {
		s.Log.Warn().Err(err).Str("key", key).Int("line", l.N).Msg("serve a line's audio")
		if cw.n == 0 {
			w.Header().Del("Content-Type")
			s.Fail(w, r, apierr.Unavailable("the line's audio cannot be read now"))
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
