package answer

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRecorderKeepsTheStatusAndTheStartOfTheBody: the first status is
// kept (200 for a body written without one), the body up to Limit, and
// everything reaches the client.
func TestRecorderKeepsTheStatusAndTheStartOfTheBody(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	r := &Recorder{ResponseWriter: w, Limit: 4}
	_, _ = r.Write([]byte("abc"))
	_, _ = r.Write([]byte("def"))
	r.WriteHeader(http.StatusTeapot)
	if r.Status != http.StatusOK || r.Body.String() != "abcdef" || w.Body.String() != "abcdef" {
		t.Fatalf("status %d, kept %q, sent %q; want 200, the writes until past 4 bytes, all", r.Status, r.Body.String(), w.Body.String())
	}
	w = httptest.NewRecorder()
	r = &Recorder{ResponseWriter: w, Limit: 2}
	r.WriteHeader(http.StatusCreated)
	_, _ = r.Write([]byte("xy"))
	_, _ = r.Write([]byte("z"))
	if r.Status != http.StatusCreated || r.Body.String() != "xy" || w.Code != http.StatusCreated {
		t.Fatalf("status %d (sent %d), kept %q; want 201 and \"xy\"", r.Status, w.Code, r.Body.String())
	}
}
