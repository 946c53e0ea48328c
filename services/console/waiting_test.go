package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// startDispatcher runs the real dispatcher on the database at dbURL until
// the test ends and returns its API's URL.
func startDispatcher(t *testing.T, dbURL, token string) string {
	t.Helper()
	dir, err := testenv.SharedBinaries("dispatcher")
	if err != nil {
		t.Fatal(err)
	}
	api, ops := testenv.FreeAddr(t), testenv.FreeAddr(t)
	cmd := exec.Command(filepath.Join(dir, "dispatcher"))
	cmd.Env = []string{"DATABASE_URL=" + dbURL, "AMQP_URL=" + testenv.AMQP(t), "DISPATCHER_HTTP_ADDR=" + api,
		"OPS_ADDR=" + ops, "DISPATCHER_API_TOKEN=" + token, "LOG_LEVEL=warn"}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	testenv.WaitReady(t, "the dispatcher", ops, nil, func() string { return "(its log is on standard error)" })
	return "http://" + api
}

// TestWaitingProjectsThroughTheDispatcher: the console lists every
// project's waiting queue through a real dispatcher's GET /queue/projects.
func TestWaitingProjectsThroughTheDispatcher(t *testing.T) {
	t.Parallel()
	const dispToken = "dispatcher-token-0123456789"
	f := setup(t)
	f.srv.cfg.DispatcherURL = startDispatcher(t, f.dbURL, dispToken)
	f.srv.cfg.DispatcherToken = dispToken
	busy, quiet := uuid.New(), uuid.New()
	for _, e := range []struct {
		project uuid.UUID
		age     string
	}{{busy, "2 minutes"}, {busy, "1 minute"}, {quiet, "5 seconds"}} {
		if _, err := f.pool.Exec(context.Background(), `INSERT INTO visitor_waiting_queue
			(id, project_id, visitor_id, source, priority, entered_at) VALUES ($1, $2, $3, 'visitor', 1, now() - $4::interval)`,
			uuid.New(), e.project, uuid.New(), e.age); err != nil {
			t.Fatal(err)
		}
	}
	var out struct {
		Projects []struct {
			ProjectID          uuid.UUID `json:"project_id"`
			Waiting            int       `json:"waiting"`
			LongestWaitSeconds float64   `json:"longest_wait_seconds"`
		} `json:"projects"`
	}
	decode(t, f.do(t, "GET", "/api/waiting/projects", readToken, "", nil), http.StatusOK, &out)
	if len(out.Projects) != 2 || out.Projects[0].ProjectID != busy || out.Projects[0].Waiting != 2 ||
		out.Projects[0].LongestWaitSeconds < 119 || out.Projects[1].ProjectID != quiet || out.Projects[1].Waiting != 1 {
		t.Fatalf("projects %+v, want busy (2, about 120 s) then quiet (1)", out.Projects)
	}
	// The query goes along: limit 1 keeps the longest wait.
	decode(t, f.do(t, "GET", "/api/waiting/projects?limit=1", readToken, "", nil), http.StatusOK, &out)
	if len(out.Projects) != 1 || out.Projects[0].ProjectID != busy {
		t.Fatalf("limit=1: %+v", out.Projects)
	}
	decode(t, f.do(t, "GET", "/api/waiting/projects", "", "", nil), http.StatusUnauthorized, nil)
	// The dispatcher's own errors come back with the console's codes.
	var e apiError
	decode(t, f.do(t, "GET", "/api/waiting/entries/"+uuid.NewString(), readToken, "", nil), http.StatusNotFound, &e)
	if e.Code != "not_found" || !strings.Contains(e.Message, "not found") {
		t.Fatalf("unknown entry: %+v", e)
	}
	f.srv.cfg.DispatcherToken = "wrong-token-0123456789"
	decode(t, f.do(t, "GET", "/api/waiting/projects", readToken, "", nil), http.StatusServiceUnavailable, &e)
	if e.Code != "unavailable" || !strings.Contains(e.Message, "DISPATCHER_API_TOKEN") {
		t.Fatalf("the console's token refused: %+v", e)
	}
}

// fakeDispatcher answers every request with the status and body of the
// next call to answer, and records the request URIs it was sent.
type fakeDispatcher struct {
	mu     sync.Mutex
	seen   []string
	status int
	body   string
}

func (d *fakeDispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, r.RequestURI)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(d.status)
	_, _ = io.WriteString(w, d.body)
}

func (d *fakeDispatcher) answer(status int, body string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status, d.body, d.seen = status, body, nil
}

func (d *fakeDispatcher) requests() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.seen...)
}

// TestWaitingProxyForwardsNothingMalformed: ids that are not canonical,
// non-nil UUIDs (traversal among them, escaped or not) and query values
// the dispatcher does not take are answered 400 bad_request by the console
// and never reach the dispatcher; what is forwarded is rebuilt from the
// checked values.
func TestWaitingProxyForwardsNothingMalformed(t *testing.T) {
	t.Parallel()
	fake := &fakeDispatcher{}
	disp := httptest.NewServer(fake)
	t.Cleanup(disp.Close)
	f := setup(t, func(c *Config) { c.DispatcherURL, c.DispatcherToken = disp.URL, "dispatcher-token-0123456789" })
	id := uuid.NewString()
	var bad []string
	for _, v := range []string{"%2e%2e", "%2E%2E%2Fstaff", "..%2f..%2fstaff%2f" + id, "x%2F..%2F" + id, "not-a-uuid",
		"%7B" + id + "%7D", "urn:uuid:" + id, strings.ReplaceAll(id, "-", ""), uuid.Nil.String(), id + "%00", "%00"} {
		bad = append(bad, "/api/waiting/entries/"+v, "/api/waiting/projects/"+v+"/status", "/api/waiting/agents/"+v+"/status")
	}
	for _, q := range []string{"?limit=abc", "?limit=-1", "?limit=1001", "?limit=1&limit=2", "?bogus=1", "?limit=%zz", "?limit=5%26x=1&y=2"} {
		bad = append(bad, "/api/waiting/projects"+q)
	}
	bad = append(bad, "/api/waiting/projects/"+id+"/status?limit=101", "/api/waiting/entries/"+id+"?limit=1")
	fake.answer(http.StatusOK, `{}`)
	for _, path := range bad {
		resp := f.do(t, "GET", path, readToken, "", nil)
		body, _ := io.ReadAll(resp.Body)
		var e apiError
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Code != "bad_request" {
			t.Errorf("GET %s: %d %s, want 400 bad_request", path, resp.StatusCode, body)
		}
		if got := fake.requests(); len(got) != 0 {
			t.Errorf("GET %s forwarded %v", path, got)
		}
	}
	// What is forwarded: the checked id and limit only.
	decode(t, f.do(t, "GET", "/api/waiting/projects/"+strings.ToUpper(id)+"/status?limit=007", readToken, "", nil), http.StatusOK, nil)
	if got := fake.requests(); len(got) != 1 || got[0] != "/queue/projects/"+strings.ToUpper(id)+"/status?limit=7" {
		t.Fatalf("forwarded %v", got)
	}
}

// TestWaitingProxyMapsTheDispatchersCodes: an error of the dispatcher is
// answered with the console's status and code (API.md), never the
// dispatcher's own code, and never a 5xx of the dispatcher passed through.
func TestWaitingProxyMapsTheDispatchersCodes(t *testing.T) {
	t.Parallel()
	fake := &fakeDispatcher{}
	disp := httptest.NewServer(fake)
	t.Cleanup(disp.Close)
	f := setup(t, func(c *Config) { c.DispatcherURL, c.DispatcherToken = disp.URL, "dispatcher-token-0123456789" })
	for _, c := range []struct {
		status     int
		code       string
		wantStatus int
		wantCode   string
	}{
		{400, "VALIDATION_ERROR", 400, "bad_request"},
		{404, "NOT_FOUND", 404, "not_found"},
		{409, "BUSINESS_NOT_ASSIGNED", 409, "conflict"},
		{413, "PAYLOAD_TOO_LARGE", 413, "too_large"},
		{401, "UNAUTHORIZED", 503, "unavailable"},
		{405, "METHOD_NOT_ALLOWED", 503, "unavailable"},
		{415, "UNSUPPORTED_MEDIA_TYPE", 503, "unavailable"},
		{499, "REQUEST_CANCELED", 503, "unavailable"},
		{500, "INTERNAL_ERROR", 503, "unavailable"},
		{502, "", 503, "unavailable"},
	} {
		body := fmt.Sprintf(`{"code": %q, "message": "dispatcher says %s"}`, c.code, c.code)
		if c.code == "" {
			body = "<html>bad gateway</html>"
		}
		fake.answer(c.status, body)
		var e apiError
		decode(t, f.do(t, "GET", "/api/waiting/entries/"+uuid.NewString(), readToken, "", nil), c.wantStatus, &e)
		if e.Code != c.wantCode || strings.Contains(e.Message, "/queue/") {
			t.Errorf("dispatcher %d %s: console %s %q, want %d %s", c.status, c.code, e.Code, e.Message, c.wantStatus, c.wantCode)
		}
	}
}
