package main

import (
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
