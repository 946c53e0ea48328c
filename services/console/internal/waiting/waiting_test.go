package waiting

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// proxyOf is a console route relaying target to the dispatcher at url, and
// the errors it answered, by status and code.
func proxyOf(url, target string) (http.Handler, *[]string) {
	var failed []string
	px := Proxy{Dispatcher: func() (string, string) { return url, "dispatcher-token" },
		Fail: func(w http.ResponseWriter, _ *http.Request, err error) {
			ae, _ := apierr.As(err)
			failed = append(failed, fmt.Sprintf("%d %s", ae.Status, ae.Code))
			w.WriteHeader(ae.Status)
		}}
	mux := http.NewServeMux()
	mux.Handle("GET /w/{id}", px.Route(target))
	return mux, &failed
}

// TestNothingMalformedIsForwarded: a path value that is not a canonical,
// non-nil UUID, or a query other than the route's limit within its
// bounds, is answered 400 without asking the dispatcher.
func TestNothingMalformedIsForwarded(t *testing.T) {
	t.Parallel()
	var asked []string
	disp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer disp.Close()
	h, failed := proxyOf(disp.URL, "/queue/projects/{id}/status")
	id := "6f0c7a52-3b1e-4d8e-9a57-1f2b7c0d4e13"
	for _, p := range []string{"/w/nope", "/w/00000000-0000-0000-0000-000000000000", "/w/{" + id + "}",
		"/w/" + strings.ReplaceAll(id, "-", ""), "/w/" + id + "?limit=101", "/w/" + id + "?limit=1&limit=2",
		"/w/" + id + "?other=1"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", p, rec.Code)
		}
	}
	if len(asked) != 0 {
		t.Fatalf("forwarded %v", asked)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/w/"+id+"?limit=7", nil))
	want := "/queue/projects/" + id + "/status?limit=7 Bearer dispatcher-token"
	if rec.Code != http.StatusOK || rec.Body.String() != `{"ok":true}` || len(asked) != 1 || asked[0] != want {
		t.Fatalf("relayed %d %s, asked %v; want 200 and %q", rec.Code, rec.Body, asked, want)
	}
	if len(*failed) != 7 {
		t.Fatalf("failed %v", *failed)
	}
}

// TestTheDispatchersCodesAreTheConsoles: each dispatcher code is answered
// with the console's; the dispatcher's own trouble, or no dispatcher, is
// 503.
func TestTheDispatchersCodesAreTheConsoles(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]string{
		"VALIDATION_ERROR": "400 bad_request", "NOT_FOUND": "404 not_found", "BUSINESS_AGENT_BUSY": "409 conflict",
		"PAYLOAD_TOO_LARGE": "413 too_large", "UNAUTHORIZED": "503 unavailable", "INTERNAL": "503 unavailable",
	} {
		ae, _ := apierr.As(dispatcherError(http.StatusTeapot, []byte(`{"code":"`+code+`","message":"m"}`)))
		if got := fmt.Sprintf("%d %s", ae.Status, ae.Code); got != want {
			t.Errorf("%s: %s, want %s", code, got, want)
		}
	}
	h, failed := proxyOf("", "/queue/entries/{id}")
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/w/6f0c7a52-3b1e-4d8e-9a57-1f2b7c0d4e13", nil))
	if len(*failed) != 1 || (*failed)[0] != "503 unavailable" {
		t.Fatalf("no dispatcher: %v, want 503 unavailable", *failed)
	}
}
