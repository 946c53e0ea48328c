package projectmetrics

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/tenant"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, 2)) }

// insertTask adds a task of project with status, created now.
func insertTask(t *testing.T, pool *pgxpool.Pool, project, status string) {
	t.Helper()
	id := uuid.New()
	if _, err := pool.Exec(context.Background(), `INSERT INTO tasks (id, status, source_language, target_language,
		source_video_key, created_at, updated_at, project) VALUES ($1, $2, 'en', 'es', $3, $4, $4, $5)`,
		id, status, wire.DefaultKeys(id).SourceVideo, time.Now(), project); err != nil {
		t.Fatal(err)
	}
}

// TestProjectMetricsAreBounded: the per-project metrics name the 20
// projects with the most tasks and sum the others as "other", and count a
// project's minutes on the shared engines today.
func TestProjectMetricsAreBounded(t *testing.T) {
	t.Parallel()
	pool := testenv.Postgres(t).Pool
	ctx := context.Background()
	for i := range 25 {
		p := fmt.Sprintf("p%02d", i)
		if _, err := tenant.CreateProject(ctx, pool, tenant.NewProject{ID: p}, "test"); err != nil {
			t.Fatal(err)
		}
		for range 25 - i { // p00 has the most tasks
			insertTask(t, pool, p, "done")
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO project_usage (project, day, shared_seconds)
		VALUES ('p00', (now() AT TIME ZONE 'UTC')::date, 90), ('p24', (now() AT TIME ZONE 'UTC')::date, 30)`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(pool))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "project" {
					key = l.GetValue()
				}
				if l.GetName() == "state" && l.GetValue() != "created" {
					key = ""
				}
			}
			if key != "" {
				if labels[mf.GetName()] == nil {
					labels[mf.GetName()] = map[string]float64{}
				}
				labels[mf.GetName()][key] = m.GetGauge().GetValue()
			}
		}
	}
	tasks := labels["dubflow_project_tasks"]
	if len(tasks) != 21 || tasks["p00"] != 25 || tasks["other"] != 1+2+3+4+5 || tasks["p20"] != 0 {
		t.Errorf("dubflow_project_tasks{state=created}: %v, want p00..p19 and other (p20..p24: 15 tasks)", tasks)
	}
	if m := labels["dubflow_project_shared_engine_minutes"]; m["p00"] != 1.5 || m["other"] != 0.5 {
		t.Errorf("dubflow_project_shared_engine_minutes: %v, want p00 1.5, other 0.5", m)
	}
}
