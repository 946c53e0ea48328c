package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
}
