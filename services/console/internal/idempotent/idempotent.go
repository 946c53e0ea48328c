// Package idempotent makes a submission safe to send again: a request
// with an Idempotency-Key runs at most once per caller and key
// (pkg/idempotency), and the same request again is answered the first
// one's answer.
package idempotent

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
	"github.com/dubflow/dubflow/services/console/internal/answer"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Header is the header that makes a submission safe to send again.
const Header = "Idempotency-Key"

// idempotencyPoll bounds how often a request waits on the first request
// with its key.
const idempotencyPoll = 250 * time.Millisecond

// idempotencySweep is how often expired keys are deleted.
const idempotencySweep = 10 * time.Minute

// Conflict is the answer to a key used for another request.
func Conflict(msg string) error {
	return &apierr.Error{Status: http.StatusConflict, Code: "idempotency_key_reused", Message: msg}
}

type reservedTaskKey struct{}

// TaskID is the id POST /api/tasks creates its task with: the one the
// request's Idempotency-Key reserved, else a new one.
func TaskID(r *http.Request) uuid.UUID {
	if id, ok := r.Context().Value(reservedTaskKey{}).(uuid.UUID); ok && id != uuid.Nil {
		return id
	}
	return uuid.New()
}

// Guard is what Wrap and Sweep use.
type Guard struct {
	Pool *pgxpool.Pool
	Log  zerolog.Logger
	// Fail answers an error.
	Fail func(w http.ResponseWriter, r *http.Request, err error)
	// Who names the caller a key belongs to (the token's name).
	Who func(r *http.Request) string
	// TaskOfUpload is the task id a JSON body's sourceVideoKey names
	// (uuid.Nil when it names none).
	TaskOfUpload func(key string) uuid.UUID
	// FormError answers a multipart body that could not be read whole.
	FormError func(err error) error
}

// Wrap runs next — POST /api/tasks — at most once per principal
// (the token's name) and Idempotency-Key within idempotency.TTL: the same
// request again answers the first one's 201 and body, byte for byte, with
// Idempotent-Replayed: true; another request with the key is 409
// idempotency_key_reused; a request arriving while the first is in flight
// waits for its answer. A refused request is not remembered. Without the
// header, next runs as it is.
func (g Guard) Wrap(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		keys := r.Header.Values(Header)
		if len(keys) == 0 {
			next(w, r)
			return
		}
		if len(keys) > 1 {
			g.Fail(w, r, apierr.BadRequest(Header+": given more than once"))
			return
		}
		if err := idempotency.CheckKey(keys[0]); err != nil {
			g.Fail(w, r, apierr.BadRequest(err.Error()))
			return
		}
		fp, taskID, done, err := g.spoolForFingerprint(r)
		defer done()
		if err != nil {
			g.Fail(w, r, err)
			return
		}
		k := idempotency.Key{Principal: g.Who(r), Key: keys[0]}
		owned, id, first, err := idempotency.Begin(r.Context(), g.Pool, k, fp, taskID, idempotencyPoll)
		switch {
		case errors.Is(err, idempotency.ErrReused):
			g.Fail(w, r, Conflict(Header+" "+keys[0]+": "+err.Error()+"; choose a new key"))
		case err != nil:
			g.Fail(w, r, apierr.UnavailableBecause("the Idempotency-Key cannot be checked now; try again", err))
		case !owned:
			auditlog.Note(r, "replayed", true)
			replayAnswer(w, first)
		default:
			g.runOnce(w, r.WithContext(context.WithValue(r.Context(), reservedTaskKey{}, id)), k, next)
		}
	}
}

// runOnce runs next for the request that owns k and records its answer
// when it created the task, or forgets k when it did not.
func (g Guard) runOnce(w http.ResponseWriter, r *http.Request, k idempotency.Key, next http.HandlerFunc) {
	rec := &answer.Recorder{ResponseWriter: w, Limit: 64 << 10}
	next(rec, r)
	ctx := context.WithoutCancel(r.Context())
	var err error
	if rec.Status == http.StatusCreated {
		var c struct {
			TaskID uuid.UUID `json:"taskId"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &c)
		err = idempotency.Finish(ctx, g.Pool, k, idempotency.Answer{TaskID: c.TaskID, Status: rec.Status, Body: rec.Body.Bytes()})
	} else {
		err = idempotency.Abandon(ctx, g.Pool, k)
	}
	if err != nil {
		// The key is taken over after idempotency.StaleAfter.
		g.Log.Error().Err(err).Str("key", k.Key).Msg("idempotency key not recorded")
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

// spoolForFingerprint reads the request's body, replacing it with what it
// read, and returns its fingerprint — what makes two submissions the same
// request whatever their encoding: a JSON body's value with its keys in
// order; a multipart form's parts' names, file names and contents (not its
// random boundary) — and the task id it would create (an upload's, for
// JSON; none yet for multipart). done removes what was spooled to disk.
func (g Guard) spoolForFingerprint(r *http.Request) (fp []byte, taskID uuid.UUID, done func(), err error) {
	done = func() {}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, uuid.Nil, done, jsonbody.ReadError(err)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		fp, taskID = g.jsonFingerprint(b)
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
		return nil, uuid.Nil, done, g.FormError(err)
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
func (g Guard) jsonFingerprint(b []byte) ([]byte, uuid.UUID) {
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
			id = g.TaskOfUpload(key)
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

// Sweep deletes the expired keys at start and every idempotencySweep
// until ctx ends.
func (g Guard) Sweep(ctx context.Context) error {
	sweep := func(ctx context.Context) {
		n, err := idempotency.Sweep(ctx, g.Pool)
		switch {
		case err != nil && ctx.Err() == nil:
			g.Log.Warn().Err(err).Msg("sweep idempotency keys")
		case n > 0:
			g.Log.Info().Int64("deleted", n).Msg("expired idempotency keys deleted")
		}
	}
	sweep(ctx)
	ops.Every(ctx, idempotencySweep, sweep)
	return nil
}
