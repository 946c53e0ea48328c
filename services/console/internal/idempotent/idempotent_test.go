package idempotent

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, 2)) }

// guard is g, its failures are answered with
// their status alone.
func guard(g Guard) Guard {
	g.Log = zerolog.Nop()
	g.Fail = func(w http.ResponseWriter, _ *http.Request, err error) {
		ae, _ := apierr.As(err)
		if ae == nil {
			ae = &apierr.Error{Status: http.StatusInternalServerError, Code: "internal"}
		}
		w.WriteHeader(ae.Status)
		fmt.Fprint(w, ae.Code)
	}
	g.Who = func(*http.Request) string { return "alice" }
	g.TaskOfUpload = func(string) uuid.UUID { return uuid.Nil }
	g.FormError = func(error) error { return apierr.BadRequest("form") }
	return g
}

// TestTheSameRequestHasTheSameFingerprint: a JSON body's keys, or a form's
// fields, in another order (or another boundary) are the same request.
func TestTheSameRequestHasTheSameFingerprint(t *testing.T) {
	t.Parallel()
	g := guard(Guard{})
	a, _ := g.jsonFingerprint([]byte(`{"a": 1, "b": "x"}`))
	b, _ := g.jsonFingerprint([]byte(`{"b":"x","a":1}`))
	c, _ := g.jsonFingerprint([]byte(`{"b":"y","a":1}`))
	if !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Fatalf("JSON fingerprints: same keys reordered equal %v, another value differs %v", bytes.Equal(a, b), !bytes.Equal(a, c))
	}
	form := func(fields ...string) []byte {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for i := 0; i < len(fields); i += 2 {
			_ = mw.WriteField(fields[i], fields[i+1])
		}
		_ = mw.Close()
		r := httptest.NewRequest("POST", "/", &buf)
		r.Header.Set("Content-Type", mw.FormDataContentType())
		fp, _, done, err := g.spoolForFingerprint(r)
		defer done()
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	if x, y := form("a", "1", "b", "2"), form("b", "2", "a", "1"); !bytes.Equal(x, y) {
		t.Fatal("a form's fields in another order are another request")
	}
	if x, y := form("a", "1"), form("a", "2"); bytes.Equal(x, y) {
		t.Fatal("a form with another value is the same request")
	}
}

// TestAKeyAnswersTheFirstAnswer: without a key the handler runs each
// time; with one, once: the same request again is the first 201, byte for
// byte; another request with the key is 409; a malformed key is 400.
func TestAKeyAnswersTheFirstAnswer(t *testing.T) {
	t.Parallel()
	g := guard(Guard{Pool: testenv.Postgres(t).Pool})
	runs := 0
	h := g.Wrap(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"taskId":%q,"run":%d}`, TaskID(r), runs)
	})
	send := func(key, body string, keys ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/api/tasks", strings.NewReader(body))
		if key != "" {
			r.Header.Set(Header, key)
		}
		for _, k := range keys {
			r.Header.Add(Header, k)
		}
		rec := httptest.NewRecorder()
		h(rec, r)
		return rec
	}
	send("", `{}`)
	send("", `{}`)
	if runs != 2 {
		t.Fatalf("without a key: %d runs, want 2", runs)
	}
	first := send("k-1", `{"a":1}`)
	again := send("k-1", `{ "a" : 1 }`)
	if runs != 3 || again.Code != http.StatusCreated || again.Body.String() != first.Body.String() ||
		again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("again: %d %s (replayed %q) after %d runs; want the first answer %s", again.Code, again.Body,
			again.Header().Get("Idempotent-Replayed"), runs, first.Body)
	}
	if rec := send("k-1", `{"a":2}`); rec.Code != http.StatusConflict || rec.Body.String() != "idempotency_key_reused" {
		t.Fatalf("another request with the key: %d %s, want 409 idempotency_key_reused", rec.Code, rec.Body)
	}
	if rec := send("", `{}`, "k-2", "k-3"); rec.Code != http.StatusBadRequest {
		t.Fatalf("two keys: %d, want 400", rec.Code)
	}
}
