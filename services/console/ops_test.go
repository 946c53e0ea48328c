package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/history"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Tokens of the named-token tests (DUBFLOW_API_TOKENS).
const (
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdef"
)

// exec runs a statement on the fixture's database.
func (f *fixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// ids lists the task ids of a page.
func ids(p taskPage) []uuid.UUID {
	out := []uuid.UUID{}
	for _, s := range p.Tasks {
		out = append(out, s.TaskID)
	}
	return out
}

func TestTaskSearchFindsByEachField(t *testing.T) {
	t.Parallel()
	f := setup(t)
	base := time.Now().Add(-3 * time.Hour)
	a := f.insertTask(t, "done", base)
	b := f.insertTask(t, "cancelled", base.Add(time.Hour))
	c := f.insertTask(t, "failed", base.Add(2*time.Hour))
	f.exec(t, `UPDATE tasks SET source_video_key = 'uploads/x/Holiday_Clip.mp4' WHERE id = $1`, a)
	f.exec(t, `UPDATE tasks SET target_language = 'de' WHERE id = $1`, b)
	f.exec(t, `UPDATE tasks SET error = 'asr: Engine exploded' WHERE id = $1`, c)
	f.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, error) VALUES ($1, 'tts', 1, 'failed', 'voice 100% gone')`, b)
	cases := []struct {
		query string
		want  []uuid.UUID
	}{
		{"q=" + a.String()[:8], []uuid.UUID{a}},
		{"q=holiday_clip", []uuid.UUID{a}},
		{"q=_clip", []uuid.UUID{a}},
		{"status=cancelled", []uuid.UUID{b}},
		{"language=de", []uuid.UUID{b}},
		{"language=en", []uuid.UUID{c, b, a}},
		{"since=" + base.Add(30*time.Minute).UTC().Format(time.RFC3339), []uuid.UUID{c, b}},
		{"until=" + base.Add(90*time.Minute).UTC().Format(time.RFC3339), []uuid.UUID{b, a}},
		{"since=150m", []uuid.UUID{c, b}},
		{"error=engine+EXPLODED", []uuid.UUID{c}},
		{"error=100%25", []uuid.UUID{b}},
		{"error=%25", []uuid.UUID{b}},
		{"language=en&status=failed&error=engine", []uuid.UUID{c}},
		{"q=nothing-like-this", []uuid.UUID{}},
	}
	for _, tc := range cases {
		var p taskPage
		f.doJSON(t, "GET", "/api/tasks?"+tc.query, nil, http.StatusOK, &p)
		if fmt.Sprint(ids(p)) != fmt.Sprint(tc.want) {
			t.Errorf("?%s found %v, want %v", tc.query, ids(p), tc.want)
		}
	}
	// Paging goes on with the search.
	var p taskPage
	f.doJSON(t, "GET", "/api/tasks?language=en&limit=2", nil, http.StatusOK, &p)
	if p.NextCursor == nil || fmt.Sprint(ids(p)) != fmt.Sprint([]uuid.UUID{c, b}) {
		t.Fatalf("first page %v", ids(p))
	}
	f.doJSON(t, "GET", "/api/tasks?language=en&limit=2&cursor="+*p.NextCursor, nil, http.StatusOK, &p)
	if p.NextCursor != nil || fmt.Sprint(ids(p)) != fmt.Sprint([]uuid.UUID{a}) {
		t.Fatalf("second page %v", ids(p))
	}
	f.doJSON(t, "GET", "/api/tasks?since=yesterday-ish", nil, http.StatusBadRequest, nil)
	f.doJSON(t, "GET", "/api/tasks?until=nope", nil, http.StatusBadRequest, nil)
}

// insertDeadLetter records a dead letter of the task's asr step.
func (f *fixture) insertDeadLetter(t *testing.T, task uuid.UUID, step, class string, failed time.Time, replayed bool) int64 {
	t.Helper()
	env, _ := wire.New(wire.StepASR, task, "trace", payloadOf("asr", task))
	body, _ := env.Marshal()
	var id int64
	var at *time.Time
	if replayed {
		at = &failed
	}
	err := f.pool.QueryRow(context.Background(), `INSERT INTO dead_letters (message_id, task_id, step, attempt,
		error_class, failure_reason, original_message, failed_at, replayed_at) VALUES ($1, $2, $3, 1, $4, 'it broke', $5, $6, $7)
		RETURNING id`, uuid.NewString(), task, step, class, body, failed, at).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestPurgeByFilterRemovesExactlyTheMatchingRowsAndArchivesThem(t *testing.T) {
	t.Parallel()
	f := setup(t)
	task := f.insertTask(t, "failed", time.Now())
	old := time.Now().Add(-48 * time.Hour)
	match1 := f.insertDeadLetter(t, task, "asr", "transient", time.Now().Add(-time.Hour), false)
	match2 := f.insertDeadLetter(t, task, "asr", "transient", time.Now().Add(-2*time.Hour), true)
	keep := []int64{
		f.insertDeadLetter(t, task, "tts", "transient", time.Now().Add(-time.Hour), false),  // other step
		f.insertDeadLetter(t, task, "asr", "permanent", time.Now().Add(-time.Hour), false),  // other class
		f.insertDeadLetter(t, task, "asr", "transient", old, false),                         // too old
		f.insertDeadLetter(t, task, "asr", "transient", time.Now().Add(time.Minute), false), // after until
	}
	filter := map[string]any{"step": "asr", "errorClass": "transient", "since": "24h",
		"until": time.Now().UTC().Format(time.RFC3339), "dryRun": true}
	var res bulkResult
	f.doJSON(t, "POST", "/api/dead-letters/purge", filter, http.StatusOK, &res)
	if res.Matched != 2 || res.Purged != nil {
		t.Fatalf("dry run %+v, want 2 matched and nothing purged", res)
	}
	var n int
	_ = f.pool.QueryRow(context.Background(), `SELECT count(*) FROM dead_letters`).Scan(&n)
	if n != 6 {
		t.Fatalf("a dry run deleted: %d dead letters left", n)
	}
	filter["dryRun"] = false
	f.doJSON(t, "POST", "/api/dead-letters/purge", filter, http.StatusOK, &res)
	slices.Sort(res.Purged)
	if fmt.Sprint(res.Purged) != fmt.Sprint([]int64{match1, match2}) {
		t.Fatalf("purged %v, want %v", res.Purged, []int64{match1, match2})
	}
	rows, _ := f.pool.Query(context.Background(), `SELECT id FROM dead_letters ORDER BY id`)
	var left []int64
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		left = append(left, id)
	}
	if fmt.Sprint(left) != fmt.Sprint(keep) {
		t.Fatalf("left %v, want %v", left, keep)
	}
	var archived int
	var by, reason string
	_ = f.pool.QueryRow(context.Background(), `SELECT count(*), min(purged_by), min(failure_reason)
		FROM dead_letters_archive WHERE id = ANY($1)`, []int64{match1, match2}).Scan(&archived, &by, &reason)
	if archived != 2 || by != "admin" || reason != "it broke" {
		t.Fatalf("archive: %d rows by %q (%q)", archived, by, reason)
	}
	var tl timeline
	f.doJSON(t, "GET", "/api/tasks/"+task.String()+"/timeline", nil, http.StatusOK, &tl)
	if !slices.ContainsFunc(tl.Events, func(e view.Event) bool { return e.Kind == view.EventDeadLetterPurged }) {
		t.Fatalf("the timeline lost the purged dead letters: %+v", tl.Events)
	}
	f.doJSON(t, "POST", "/api/dead-letters/purge", map[string]any{"step": "nope"}, http.StatusBadRequest, nil)
	f.doJSON(t, "POST", "/api/dead-letters/purge", map[string]any{"until": "whenever"}, http.StatusBadRequest, nil)
}

func TestReplayByFilterCountsWithDryRunThenReplays(t *testing.T) {
	t.Parallel()
	f := setup(t)
	t1, t2 := f.insertTask(t, "failed", time.Now()), f.insertTask(t, "failed", time.Now())
	f.insertDeadLetter(t, t1, "asr", "transient", time.Now().Add(-time.Minute), false)
	f.insertDeadLetter(t, t2, "asr", "transient", time.Now().Add(-time.Minute), false)
	f.insertDeadLetter(t, t2, "asr", "transient", time.Now().Add(-2*time.Minute), true) // replayed before
	f.insertDeadLetter(t, t2, "asr", "permanent", time.Now().Add(-time.Minute), false)
	var res bulkResult
	f.doJSON(t, "POST", "/api/dead-letters/replay", map[string]any{"errorClass": "transient", "dryRun": true}, http.StatusOK, &res)
	if res.Matched != 3 || res.Replayable != 2 || res.Replayed != nil {
		t.Fatalf("dry run %+v, want 3 matched, 2 replayable", res)
	}
	f.doJSON(t, "POST", "/api/dead-letters/replay", map[string]any{"errorClass": "transient"}, http.StatusOK, &res)
	if len(res.Replayed) != 2 || len(res.Errors) != 0 {
		t.Fatalf("replayed %+v", res)
	}
	got := map[uuid.UUID]bool{}
	for range 2 {
		env, err := wire.Decode(f.next(t, "task.asr").Body)
		if err != nil {
			t.Fatal(err)
		}
		got[env.TaskID] = true
	}
	if !got[t1] || !got[t2] {
		t.Fatalf("republished for %v, want both tasks", got)
	}
	f.doJSON(t, "POST", "/api/dead-letters/replay", map[string]any{"errorClass": "transient", "dryRun": true}, http.StatusOK, &res)
	if res.Replayable != 0 {
		t.Fatalf("after the replay %d are still replayable", res.Replayable)
	}
}

func TestTimelineListsAttemptsRetriesDeadLettersAndTheCancelInOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	id := f.insertTask(t, "running", t0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	f.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, worker, started_at, finished_at, error) VALUES
		($1, 'asr', 1, 'failed', 'w1', $2, $3, 'engine down'),
		($1, 'asr', 2, 'failed', 'w2', $4, $5, 'engine down again'),
		($1, 'asr', 3, 'succeeded', 'w1', $6, $7, '')`, id, at(1), at(2), at(7), at(8), at(20), at(21))
	f.insertDeadLetter(t, id, "asr", "transient", at(9), false)
	f.exec(t, `INSERT INTO step_replays (task_id, step, part, base_attempt, reason, created_at)
		VALUES ($1, 'asr', '', 3, 'dlq replay of dead letter 1', $2)`, id, at(19))
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/cancel", map[string]string{"reason": "enough"}, http.StatusOK, nil)

	var tl timeline
	f.doJSON(t, "GET", "/api/tasks/"+id.String()+"/timeline", nil, http.StatusOK, &tl)
	var got []string
	for _, e := range tl.Events {
		s := e.Kind
		if e.Attempt != nil {
			s += fmt.Sprint("#", *e.Attempt)
		}
		if e.Worker != "" {
			s += "@" + e.Worker
		}
		if e.Status != "" {
			s += ":" + e.Status
		}
		got = append(got, s)
	}
	want := []string{"created", "attempt_started#1@w1", "attempt_ended#1@w1:failed", "retry#2@w1",
		"attempt_started#2@w2", "attempt_ended#2@w2:failed", "dead_letter#1:transient", "replay#3",
		"attempt_started#3@w1", "attempt_ended#3@w1:succeeded", "operator:cancel", "ended:cancelled"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("timeline\n got %v\nwant %v", got, want)
	}
	retry := tl.Events[3]
	if retry.DelayMS == nil || *retry.DelayMS != 5000 || retry.Detail != "engine down" {
		t.Fatalf("retry %+v, want a delay of 5000 ms and the reason", retry)
	}
	if op := tl.Events[10]; op.Actor != "admin" || op.Detail != "ok" {
		t.Fatalf("operator event %+v", op)
	}
	f.doJSON(t, "GET", "/api/tasks/"+uuid.NewString()+"/timeline", nil, http.StatusNotFound, nil)
	f.doJSON(t, "GET", "/api/tasks/nope/timeline", nil, http.StatusBadRequest, nil)
}

func withNamedTokens(c *Config) {
	c.APITokens = "alice:" + aliceToken + ", bob:" + bobToken + ":readonly"
}

func TestAuditListsACancelAndALoginWithTheTokenName(t *testing.T) {
	t.Parallel()
	f := setup(t, withNamedTokens)
	id := f.insertTask(t, "running", time.Now())
	var sess sessionView
	decode(t, f.do(t, "POST", "/api/login", "", "application/json", strings.NewReader(`{"token":"`+aliceToken+`"}`)),
		http.StatusOK, &sess)
	if sess.Name != "alice" || sess.Role != auth.RoleAdmin {
		t.Fatalf("login as alice: %+v", sess)
	}
	decode(t, f.do(t, "POST", "/api/login", "", "application/json", strings.NewReader(`{"token":"not-a-token-at-all"}`)),
		http.StatusUnauthorized, nil)
	// bob's token is read-only: refused on every write, allowed to read.
	var refusal apiError
	decode(t, f.do(t, "POST", "/api/tasks/"+id.String()+"/cancel", bobToken, "application/json", nil), http.StatusForbidden, &refusal)
	decode(t, f.do(t, "POST", "/api/dead-letters/purge", bobToken, "application/json", strings.NewReader(`{}`)), http.StatusForbidden, nil)
	decode(t, f.do(t, "GET", "/api/audit", bobToken, "", nil), http.StatusOK, nil)
	decode(t, f.do(t, "POST", "/api/tasks/"+id.String()+"/cancel", aliceToken, "application/json", nil), http.StatusOK, nil)
	decode(t, f.do(t, "POST", "/api/tasks/"+id.String()+"/cancel", aliceToken, "application/json", nil), http.StatusConflict, nil)

	var page audit.Page
	f.srv.auditLog().FlushRefusals(context.Background()) // bob's refusals, counted
	decode(t, f.do(t, "GET", "/api/audit", bobToken, "", nil), http.StatusOK, &page)
	var got []string
	for _, e := range page.Entries {
		got = append(got, e.Action+"/"+e.Actor+"/"+e.Target+"/"+strings.SplitN(e.Outcome, ":", 2)[0])
	}
	want := []string{"cancel/alice/" + id.String() + "/conflict", "cancel/alice/" + id.String() + "/ok",
		"refused/bob/POST /api/dead-letters/purge/forbidden", "refused/bob/POST /api/tasks/{id}/cancel/forbidden",
		"login///unauthorized", "login/alice//ok"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("audit\n got %v\nwant %v", got, want)
	}
	// Filters and keyset paging.
	decode(t, f.do(t, "GET", "/api/audit?action=login&limit=1", bobToken, "", nil), http.StatusOK, &page)
	if len(page.Entries) != 1 || page.NextCursor == nil || page.Entries[0].Outcome == "ok" {
		t.Fatalf("first login page %+v", page)
	}
	decode(t, f.do(t, "GET", "/api/audit?action=login&limit=1&cursor="+*page.NextCursor, bobToken, "", nil), http.StatusOK, &page)
	if len(page.Entries) != 1 || page.Entries[0].Actor != "alice" {
		t.Fatalf("second login page %+v", page)
	}
	decode(t, f.do(t, "GET", "/api/audit?actor=bob", adminToken, "", nil), http.StatusOK, &page)
	if len(page.Entries) != 2 || page.Entries[0].Action != auditlog.ActionRefused || page.Entries[1].Action != auditlog.ActionRefused {
		t.Fatalf("bob did nothing but was refused twice, audit says %+v", page.Entries)
	}
	// The single tokens still work, named admin and read.
	decode(t, f.do(t, "POST", "/api/tasks/"+uuid.NewString()+"/cancel", adminToken, "application/json", nil), http.StatusNotFound, nil)
	decode(t, f.do(t, "GET", "/api/audit?actor=admin", readToken, "", nil), http.StatusOK, &page)
	if len(page.Entries) != 1 || page.Entries[0].Outcome[:9] != "not_found" {
		t.Fatalf("admin's entries %+v", page.Entries)
	}
}

// consoleOn is a second console (a restart, or another replica) on the
// database at url, with its own pool.
func consoleOn(t testing.TB, f *fixture) *httptest.Server {
	pool, err := pgxpool.New(context.Background(), f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := &server{cfg: f.srv.cfg, log: zerolog.Nop(), pool: pool, queues: f.srv.queues, auth: newAuth(f.srv.cfg),
		logins: ratelimit.New(100, 100)}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs
}

func TestHistorySurvivesARestartAndIsSampledOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	now := time.Now().Truncate(history.SampleEvery).Add(-history.SampleEvery) // the later sample is not in the future
	id := f.insertTask(t, "done", now.Add(-time.Hour))
	f.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, started_at, finished_at) VALUES
		($1, 'asr', 1, 'failed', $2, $3), ($1, 'asr', 2, 'succeeded', $4, $5)`,
		id, now.Add(-50*time.Second), now.Add(-40*time.Second), now.Add(-30*time.Second), now.Add(-10*time.Second))
	if err := f.ch.Publish("task_exchange", "task.tts", false, false, amqpMsg(`{}`)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		q, err := f.ch.QueueDeclarePassive("task.tts", true, false, false, false, nil)
		if err == nil && q.Messages == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the message did not reach task.tts: %+v %v", q, err)
		}
	}
	// Two replicas sample the same instants: each instant is sampled once.
	a, b := f.srv.sampler(func() time.Time { return now }), f.srv.sampler(func() time.Time { return now })
	for _, m := range []history.Sampler{a, b} {
		if err := m.Sample(ctx); err != nil {
			t.Fatal(err)
		}
	}
	later := f.srv.sampler(func() time.Time { return now.Add(history.SampleEvery) })
	if err := later.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	// A restart: a new console on the same database answers the samples.
	hs := consoleOn(t, f)
	req, _ := http.NewRequest("GET", hs.URL+"/api/metrics/history?series=step_attempts,error_rate,step_duration_p95,queue_depth&step=asr&since=2h", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h history.Report
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Source != "postgres" || len(h.Series) != 4 {
		t.Fatalf("history %+v %v", h, err)
	}
	byName := map[string][]history.Line{}
	for _, s := range h.Series {
		byName[s.Name] = s.Lines
	}
	if l := byName["step_attempts"]; len(l) != 1 || l[0].Key != "asr" || len(l[0].Points) != 2 || l[0].Points[0][1] != 2 ||
		l[0].Points[0][0] != float64(now.UnixMilli()) {
		t.Fatalf("step_attempts %+v, want 2 samples of asr, 2 attempts at %d", l, now.UnixMilli())
	}
	if l := byName["error_rate"]; len(l) != 1 || l[0].Points[0][1] != 0.5 {
		t.Fatalf("error_rate %+v, want 0.5", l)
	}
	if l := byName["step_duration_p95"]; len(l) != 1 || l[0].Points[0][1] < 10 || l[0].Points[0][1] > 20 {
		t.Fatalf("p95 %+v, want between 10 s and 20 s", l)
	}
	if l := byName["queue_depth"]; len(l) != 1 || l[0].Key != "task.asr" || l[0].Points[0][1] != 0 {
		t.Fatalf("queue depth of asr %+v, want task.asr empty", l)
	}
	var tts history.Report
	f.doJSON(t, "GET", "/api/metrics/history?series=queue_depth&step=tts", nil, http.StatusOK, &tts)
	if l := tts.Series[0].Lines; len(l) != 1 || l[0].Key != "task.tts" || len(l[0].Points) != 2 || l[0].Points[0][1] != 1 {
		t.Fatalf("queue depth of tts %+v, want the message waiting in task.tts at each sample", l)
	}
}

func TestHistoryIsDownsampledAndBounded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Hour)
	// Fine samples of two hours ago, two days ago and ten days ago.
	for i := range 8 {
		f.exec(t, `INSERT INTO metric_samples (series, key, at, value) VALUES ('tasks_done', '', $1, $2), ('tasks_done', '', $3, 1),
			('tasks_done', '', $4, 2)`, now.Add(-2*time.Hour).Add(time.Duration(i)*history.SampleEvery), float64(i),
			now.Add(-48*time.Hour).Add(time.Duration(i)*history.SampleEvery), now.Add(-240*time.Hour).Add(time.Duration(i)*history.SampleEvery))
	}
	if err := f.srv.sampler(func() time.Time { return now }).Sample(ctx); err != nil {
		t.Fatal(err)
	}
	rows, _ := f.pool.Query(ctx, `SELECT at, step_seconds, value FROM metric_samples
		WHERE series = 'tasks_done' AND at < $1 ORDER BY at`, now.Add(-time.Hour))
	var got []string
	for rows.Next() {
		var at time.Time
		var step int
		var v float64
		_ = rows.Scan(&at, &step, &v)
		got = append(got, fmt.Sprintf("%s/%d/%g", now.Sub(at), step, v))
	}
	if want := []string{"240h0m0s/3600/2", "48h0m0s/3600/1", "2h0m0s/60/1.5", "1h59m0s/60/5.5"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("old samples %v, want %v (an hour's average beyond a day, a minute's beyond an hour)", got, want)
	}
	var h history.Report
	f.doJSON(t, "GET", "/api/metrics/history?series=tasks_done&since=3h", nil, http.StatusOK, &h)
	if len(h.Series) != 1 || len(h.Series[0].Lines) != 1 || len(h.Series[0].Lines[0].Points) != 3 {
		t.Fatalf("history %+v, want the 2 minutes and the new sample", h)
	}
	f.doJSON(t, "GET", "/api/metrics/history?series=nope", nil, http.StatusBadRequest, nil)
	f.doJSON(t, "GET", "/api/metrics/history?step=nope", nil, http.StatusBadRequest, nil)
	f.doJSON(t, "GET", "/api/metrics/history", nil, http.StatusOK, &h)
	if len(h.Series) != len(history.Names()) {
		t.Fatalf("all series: %d, want %d", len(h.Series), len(history.Names()))
	}
}

func TestHistoryFromPrometheus(t *testing.T) {
	t.Parallel()
	var asked []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+" "+r.URL.Query().Get("query")+" step="+r.URL.Query().Get("step"))
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[
			{"metric":{"queue":"task.tts"},"values":[[1700000000,"3"],[1700000015,"NaN"],[1700000030,"4"]]},
			{"metric":{"queue":"task.asr"},"values":[[1700000000,"1"]]}]}}`)
	}))
	defer prom.Close()
	f := setup(t, func(c *Config) { c.PrometheusURL = prom.URL + "/" })
	var h history.Report
	f.doJSON(t, "GET", "/api/metrics/history?series=queue_depth&since=6h&step=tts", nil, http.StatusOK, &h)
	if len(asked) != 1 || asked[0] != "/api/v1/query_range dubflow_queue_messages step=60" {
		t.Fatalf("asked Prometheus %q", asked)
	}
	l := h.Series[0].Lines
	if h.Source != "prometheus" || len(l) != 1 || l[0].Key != "task.tts" ||
		fmt.Sprint(l[0].Points) != "[[1.7e+12 3] [1.70000003e+12 4]]" {
		t.Fatalf("history %+v", h)
	}
	prom.Close()
	f.doJSON(t, "GET", "/api/metrics/history?series=queue_depth", nil, http.StatusServiceUnavailable, nil)
}

func TestAuditNamesTheTaskSubmittedAndTheTimelineShowsIt(t *testing.T) {
	t.Parallel()
	f := setup(t, withNamedTokens)
	ct, body := multipartBody(t, sampleVideo(t, "1"), map[string]string{"source": "en", "target": "es"})
	var c created
	decode(t, f.do(t, "POST", "/api/tasks", aliceToken, ct, body), http.StatusCreated, &c)
	var page audit.Page
	f.doJSON(t, "GET", "/api/audit?action=submit", nil, http.StatusOK, &page)
	if len(page.Entries) != 1 || page.Entries[0].Target != c.TaskID.String() || page.Entries[0].Actor != "alice" {
		t.Fatalf("submit entries %+v, want alice's on %s", page.Entries, c.TaskID)
	}
	var tl timeline
	f.doJSON(t, "GET", "/api/tasks/"+c.TaskID.String()+"/timeline", nil, http.StatusOK, &tl)
	// The request came (the audit's time) before the task's row was written.
	if len(tl.Events) != 2 || tl.Events[1].Kind != view.EventCreated || tl.Events[0].Actor != "alice" ||
		tl.Events[0].Status != "submit" {
		t.Fatalf("timeline %+v, want alice's submit then created", tl.Events)
	}
}
