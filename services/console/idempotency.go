package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/idempotency"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/google/uuid"
)

// idempotencyHeader is the header that makes a submission safe to send
// again (pkg/idempotency).
const idempotencyHeader = "Idempotency-Key"

// idempotencyPoll bounds how often a request waits on the first request
// with its key.
const idempotencyPoll = 250 * time.Millisecond

// idempotencySweep is how often expired keys are deleted.
const idempotencySweep = 10 * time.Minute

// idempotencyConflict is the answer to a key used for another request.
func idempotencyConflict(msg string) error {
	return &apiError{Status: http.StatusConflict, Code: "idempotency_key_reused", Message: msg}
}

type reservedTaskKey struct{}

// reservedTaskID is the id POST /api/tasks creates its task with: the one
// the request's Idempotency-Key reserved, else a new one.
func reservedTaskID(r *http.Request) uuid.UUID {
	if id, ok := r.Context().Value(reservedTaskKey{}).(uuid.UUID); ok && id != uuid.Nil {
		return id
	}
	return uuid.New()
}

// idempotent runs next — POST /api/tasks — at most once per principal
// (the token's name) and Idempotency-Key within idempotency.TTL: the same
// request again answers the first one's 201 and body, byte for byte, with
// Idempotent-Replayed: true; another request with the key is 409
// idempotency_key_reused; a request arriving while the first is in flight
// waits for its answer. A refused request is not remembered. Without the
// header, next runs as it is.
func (s *server) idempotent(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		keys := r.Header.Values(idempotencyHeader)
		if len(keys) == 0 {
			next(w, r)
			return
		}
		if len(keys) > 1 {
			s.fail(w, r, apierr.BadRequest(idempotencyHeader+": given more than once"))
			return
		}
		if err := idempotency.CheckKey(keys[0]); err != nil {
			s.fail(w, r, apierr.BadRequest(err.Error()))
			return
		}
		fp, taskID, done, err := s.spoolForFingerprint(r)
		defer done()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		k := idempotency.Key{Principal: principalOf(r).Name, Key: keys[0]}
		owned, id, first, err := idempotency.Begin(r.Context(), s.pool, k, fp, taskID, idempotencyPoll)
		switch {
		case errors.Is(err, idempotency.ErrReused):
			s.fail(w, r, idempotencyConflict(idempotencyHeader+" "+keys[0]+": "+err.Error()+"; choose a new key"))
		case err != nil:
			s.fail(w, r, apierr.UnavailableBecause("the Idempotency-Key cannot be checked now; try again", err))
		case !owned:
			auditlog.Note(r, "replayed", true)
			replayAnswer(w, first)
		default:
			s.runOnce(w, r.WithContext(context.WithValue(r.Context(), reservedTaskKey{}, id)), k, next)
		}
	}
}

// runOnce runs next for the request that owns k and records its answer
// when it created the task, or forgets k when it did not.
func (s *server) runOnce(w http.ResponseWriter, r *http.Request, k idempotency.Key, next http.HandlerFunc) {
	rec := &answerRecorder{ResponseWriter: w}
	next(rec, r)
	ctx := context.WithoutCancel(r.Context())
	var err error
	if rec.status == http.StatusCreated {
		var c created
		_ = json.Unmarshal(rec.body.Bytes(), &c)
		err = idempotency.Finish(ctx, s.pool, k, idempotency.Answer{TaskID: c.TaskID, Status: rec.status, Body: rec.body.Bytes()})
	} else {
		err = idempotency.Abandon(ctx, s.pool, k)
	}
	if err != nil {
		// The key is taken over after idempotency.StaleAfter.
		s.log.Error().Err(err).Str("key", k.Key).Msg("idempotency key not recorded")
	}
}

// replayAnswer writes the first request's answer again.
func replayAnswer(w http.ResponseWriter, a idempotency.Answer) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// answerRecorder keeps the status and the body of an answer (POST
// /api/tasks answers a small JSON document).
type answerRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (a *answerRecorder) WriteHeader(code int) {
	if a.status == 0 {
		a.status = code
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerRecorder) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	if a.body.Len() < 64<<10 {
		a.body.Write(b)
	}
	return a.ResponseWriter.Write(b)
}

// spoolForFingerprint reads the request's body, replacing it with what it
// read, and returns its fingerprint — what makes two submissions the same
// request whatever their encoding: a JSON body's value with its keys in
// order; a multipart form's parts' names, file names and contents (not its
// random boundary) — and the task id it would create (an upload's, for
// JSON; none yet for multipart). done removes what was spooled to disk.
func (s *server) spoolForFingerprint(r *http.Request) (fp []byte, taskID uuid.UUID, done func(), err error) {
	done = func() {}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, uuid.Nil, done, jsonbody.ReadError(err)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		fp, taskID = jsonFingerprint(b)
		return fp, taskID, done, nil
	}
	dir, err := os.MkdirTemp("", "dubflow-console-")
	if err != nil {
		return nil, uuid.Nil, done, fmt.Errorf("spool the upload: %w", err)
	}
	done = func() { _ = os.RemoveAll(dir) }
	f, err := os.Create(dir + "/body")
	if err != nil {
		return nil, uuid.Nil, done, fmt.Errorf("spool the upload: %w", err)
	}
	raw := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, raw), r.Body); err != nil {
		f.Close()
		return nil, uuid.Nil, done, formError(err, s.cfg.Limits.MaxVideoBytes)
	}
	fp = formFingerprint(f, params["boundary"], raw.Sum(nil))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, uuid.Nil, done, fmt.Errorf("spool the upload: %w", err)
	}
	r.Body = f
	return fp, uuid.Nil, func() { f.Close(); _ = os.RemoveAll(dir) }, nil
}

// jsonFingerprint hashes a JSON body's value (encoding/json writes an
// object's keys sorted) and reads the task id of its sourceVideoKey; a body
// that is not JSON hashes as it is (it will be refused).
func jsonFingerprint(b []byte) ([]byte, uuid.UUID) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	h := sha256.New()
	h.Write([]byte("json\x00"))
	if dec.Decode(&v) != nil {
		h.Write(b)
		return h.Sum(nil), uuid.Nil
	}
	canon, _ := json.Marshal(v)
	h.Write(canon)
	var id uuid.UUID
	if m, ok := v.(map[string]any); ok {
		if key, ok := m["sourceVideoKey"].(string); ok {
			id, _, _ = taskOfUploadKey(key)
		}
	}
	return h.Sum(nil), id
}

// formFingerprint hashes a multipart form's parts: each one's field name,
// file name and the hash of its content, by field name (a repeated field's
// parts in their order), so that the order a client writes its fields in
// does not matter. A form that does not parse hashes as its raw bytes
// (raw; it will be refused).
func formFingerprint(f *os.File, boundary string, raw []byte) []byte {
	h := sha256.New()
	h.Write([]byte("form\x00"))
	if _, err := f.Seek(0, io.SeekStart); err != nil || boundary == "" {
		return append(h.Sum(nil), raw...)
	}
	var parts []string
	mr := multipart.NewReader(f, boundary)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return append(h.Sum(nil), raw...)
		}
		content := sha256.New()
		if _, err := io.Copy(content, part); err != nil {
			return append(h.Sum(nil), raw...)
		}
		parts = append(parts, fmt.Sprintf("%q\x00%q\x00%x\x00", part.FormName(), part.FileName(), content.Sum(nil)))
	}
	slices.SortStableFunc(parts, func(a, b string) int {
		an, _, _ := strings.Cut(a, "\x00")
		bn, _, _ := strings.Cut(b, "\x00")
		return strings.Compare(an, bn)
	})
	for _, p := range parts {
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

// sweepIdempotency deletes the expired keys at start and every
// idempotencySweep until ctx ends.
func (s *server) sweepIdempotency(ctx context.Context) error {
	sweep := func(ctx context.Context) {
		n, err := idempotency.Sweep(ctx, s.pool)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn().Err(err).Msg("sweep idempotency keys")
		case n > 0:
			s.log.Info().Int64("deleted", n).Msg("expired idempotency keys deleted")
		}
	}
	sweep(ctx)
	ops.Every(ctx, idempotencySweep, sweep)
	return nil
}
