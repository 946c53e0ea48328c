package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// TestProjectsListIsReadOnlyAndAuthenticated: GET /queue/projects lists the
// projects with their waiting counts, needs the token, and checks limit.
func TestProjectsListIsReadOnlyAndAuthenticated(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	d := startInProcess(t, testEnv(t, db.URL, testenv.AMQP(t), nil))
	p := uuid.New()
	for range 2 {
		if code := d.call(t, "POST", "/internal/ai/events", aiEvent(p, uuid.New(), "normal"), nil); code/100 != 2 {
			t.Fatalf("enqueue: %d", code)
		}
	}
	var out struct {
		Projects []struct {
			ProjectID uuid.UUID `json:"project_id"`
			Waiting   int       `json:"waiting"`
		} `json:"projects"`
	}
	if code := d.call(t, "GET", "/queue/projects", nil, &out); code != 200 || len(out.Projects) != 1 ||
		out.Projects[0].ProjectID != p || out.Projects[0].Waiting != 2 {
		t.Fatalf("GET /queue/projects: %d %+v", code, out)
	}
	if code := d.call(t, "GET", "/queue/projects?limit=x", nil, nil); code != 400 {
		t.Fatalf("bad limit: %d, want 400", code)
	}
	if code, _ := get(t, d.base+"/queue/projects"); code != 401 {
		t.Fatalf("without the token: %d, want 401", code)
	}
}

// TestListAnswersStayBounded: however large the queue and its entries,
// every list answer is bounded by its limit and stays under 1 MiB: 150
// waiting entries each at its largest (texts of '<', which JSON writes in
// six bytes, metadata of 16 KiB) beside 150 agents (away: nothing is
// matched meanwhile), 1,500 projects, 1,200 queued orders.
func TestListAnswersStayBounded(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	d := startInProcess(t, testEnv(t, db.URL, testenv.AMQP(t), nil))
	ctx := context.Background()
	project, agent := uuid.New(), uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO visitor_waiting_queue (id, project_id, visitor_id, source, priority, reason, visitor_message,
			session_id, channel_id, channel_type, extra_metadata)
		SELECT gen_random_uuid(), $1, gen_random_uuid(), 'visitor', 1, repeat('<', 255), repeat('<', 65536),
			repeat('<', 255) || '@123456789', repeat('<', 255), 123456789,
			jsonb_build_object(repeat('<', 255), repeat('<', 16000))
		FROM generate_series(1, 150)`, project)
	exec(`INSERT INTO staff (id, project_id, availability, max_concurrent)
		SELECT gen_random_uuid(), $1, 'away', 1000 FROM generate_series(1, 150)`, project)
	exec(`INSERT INTO visitor_waiting_queue (id, project_id, visitor_id, source, priority)
		SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'visitor', 1 FROM generate_series(1, 1500)`)
	exec(`INSERT INTO agent_queues (agent_id, queue_size) VALUES ($1, 1200)`, agent)
	exec(`INSERT INTO agent_queue_items (id, agent_id, order_id, task_id)
		SELECT gen_random_uuid(), $1, gen_random_uuid(), gen_random_uuid() FROM generate_series(1, 1200)`, agent)
	for _, c := range []struct {
		path, list string
		want       int
	}{
		{"/queue/projects/" + project.String() + "/status", "entries", 100},
		{"/queue/projects/" + project.String() + "/status", "agents", 100},
		{"/queue/projects", "projects", 1000},
		{"/queue/agents/" + agent.String() + "/status", "items", 1000},
	} {
		req, _ := http.NewRequest("GET", d.base+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out map[string]json.RawMessage
		var items []json.RawMessage
		if err := json.Unmarshal(body, &out); err != nil || json.Unmarshal(out[c.list], &items) != nil {
			t.Fatalf("GET %s: %d %.200s", c.path, resp.StatusCode, body)
		}
		if resp.StatusCode != 200 || len(items) != c.want || len(body) >= 1<<20 {
			t.Fatalf("GET %s: %d, %d %s in %d bytes; want %d under 1 MiB", c.path, resp.StatusCode, len(items), c.list, len(body), c.want)
		}
		t.Logf("GET %s: %d %s, %d bytes", c.path, len(items), c.list, len(body))
	}
}
