package queue_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// backlog inserts n waiting entries into project in one statement, with
// urgencies spread over the four priorities.
func backlog(tb testing.TB, pool *pgxpool.Pool, project uuid.UUID, n int) {
	tb.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO visitor_waiting_queue
		(id, project_id, visitor_id, source, urgency, priority)
		SELECT gen_random_uuid(), $1, gen_random_uuid(), 'visitor',
		       (ARRAY['low','normal','high','urgent'])[1 + i % 4], i % 4
		FROM generate_series(1, $2) AS i`, project, n); err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `ANALYZE visitor_waiting_queue; ANALYZE staff`); err != nil {
		tb.Fatal(err)
	}
}

// explain returns EXPLAIN (ANALYZE, BUFFERS) of sql.
func explain(tb testing.TB, pool *pgxpool.Pool, sql string, args ...any) string {
	tb.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			tb.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// TestScanPlanUsesIndexes checks, on a backlog of 10,000 entries over three
// projects, that the scan and the assignment read the service-order index
// rather than the table.
func TestScanPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	for i := 0; i < 3; i++ {
		backlog(t, db.Pool, uuid.New(), 3334)
	}
	plan := explain(t, db.Pool, queue.ScanSQL, 60.0, 50)
	t.Logf("EXPLAIN of the scan:\n%s", plan)
	if !strings.Contains(plan, "visitor_waiting_queue_service_order") || strings.Contains(plan, "Seq Scan") {
		t.Fatalf("the scan does not read the service-order index only:\n%s", plan)
	}
}

// percentiles reports p50, p95 and p99 of d in milliseconds.
func percentiles(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	at := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkEnqueueToAssignment: a visitor arrives while an agent is free;
// the time from the enqueue to the committed assignment (the HTTP path:
// Enqueue, then Process).
func BenchmarkEnqueueToAssignment(b *testing.B) {
	db := testenv.Postgres(b)
	q := queue.New(db.Pool, queue.Config{MaxRetries: 3, RetryDelay: time.Minute, BatchSize: 50, MaxWorkers: 5})
	ctx := context.Background()
	project, staff := uuid.New(), uuid.New()
	backlog(b, db.Pool, uuid.New(), 10000) // other projects' load in the table
	if _, err := q.PutStaff(ctx, queue.StaffUpdate{ID: staff, ProjectID: project, Availability: queue.Online, MaxConcurrent: 1}); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		e, err := q.Enqueue(ctx, queue.EnqueueRequest{ProjectID: project, VisitorID: uuid.New(),
			Source: queue.SourceVisitor, Urgency: queue.UrgencyNormal})
		if err != nil {
			b.Fatal(err)
		}
		out, err := q.Process(ctx, e.ID, false)
		if err != nil || out.Entry.Status != queue.StatusAssigned {
			b.Fatalf("not assigned: %s %v", out.Entry.Status, err)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		if _, err := q.Release(ctx, staff); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	percentiles(b, lat)
}

// BenchmarkReleaseToAssignment: an agent ends a conversation while 10,000
// entries wait in its project; the time from the release to the next
// assignment (the HTTP path: Release, then Match).
func BenchmarkReleaseToAssignment(b *testing.B) {
	db := testenv.Postgres(b)
	q := queue.New(db.Pool, queue.Config{MaxRetries: 3, RetryDelay: time.Minute, BatchSize: 50, MaxWorkers: 5})
	ctx := context.Background()
	project, staff := uuid.New(), uuid.New()
	backlog(b, db.Pool, project, 10000+b.N)
	if _, err := q.PutStaff(ctx, queue.StaffUpdate{ID: staff, ProjectID: project, Availability: queue.Online, MaxConcurrent: 1}); err != nil {
		b.Fatal(err)
	}
	if a, err := q.Match(ctx, project); err != nil || len(a) != 1 {
		b.Fatalf("first assignment: %v %v", a, err)
	}
	b.Logf("EXPLAIN of the scan with %d waiting:\n%s", 10000+b.N-1, explain(b, db.Pool, queue.ScanSQL, 60.0, 50))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := q.Release(ctx, staff); err != nil {
			b.Fatal(err)
		}
		a, err := q.Match(ctx, project)
		if err != nil || len(a) != 1 {
			b.Fatalf("assignment after release: %v %v", a, err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	percentiles(b, lat)
}

// BenchmarkSustainedAssignments: b.N waiting entries over 4 projects, 4
// agents each with room for all of them, and 8 matchers at once (as if
// several replicas were matching); reports assignments per second.
func BenchmarkSustainedAssignments(b *testing.B) {
	db := testenv.Postgres(b)
	q := queue.New(db.Pool, queue.Config{MaxRetries: 3, RetryDelay: time.Minute, BatchSize: 50, MaxWorkers: 5})
	ctx := context.Background()
	projects := make([]uuid.UUID, 4)
	for i := range projects {
		projects[i] = uuid.New()
		backlog(b, db.Pool, projects[i], b.N/4+1)
		for j := 0; j < 4; j++ {
			if _, err := q.PutStaff(ctx, queue.StaffUpdate{ID: uuid.New(), ProjectID: projects[i],
				Availability: queue.Online, MaxConcurrent: 1000}); err != nil {
				b.Fatal(err)
			}
		}
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := q.Match(ctx, projects[w%4])
			if err != nil {
				b.Error(err)
			}
			done.Add(int64(len(a)))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	want := int64(min(4*(b.N/4+1), 4*4*1000))
	if done.Load() != want {
		b.Fatalf("assigned %d, want %d", done.Load(), want)
	}
	b.ReportMetric(float64(done.Load())/elapsed.Seconds(), "assignments/s")
}
