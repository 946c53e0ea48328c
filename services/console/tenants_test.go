package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/dubflow/dubflow/services/console/internal/history"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/dubflow/dubflow/services/console/internal/uploads"
	"github.com/google/uuid"
)

// The cross-project sweep is generated from openapi.json, as the
// conformance sweep is: every operation the document describes is sent
// with an admin token of project A naming project B's resources — B's
// task, dead letter, project, token, upload — and asking for B's things
// where the body or query can (a bulk action over every dead letter, B's
// upload key, ?project=B). An operation of the whole installation
// (x-scope: system) must answer 403; one whose path names a resource must
// answer 404 with the text an id that does not exist gets; any other must
// answer as documented and show nothing of B. Nothing of B may change
// (its rows, objects and messages, and every table's row count), and A's
// event stream never carries a B event.

// tenantFixture is two projects, A and B, and B's resources.
type tenantFixture struct {
	a, b       string
	tokenA     string // an admin token of A
	tokenB     string // an admin token of B
	tokenBID   uuid.UUID
	taskA      uuid.UUID
	taskB      uuid.UUID // failed, with a dead letter
	compB      uuid.UUID // compensating, past translation
	deadLetter int64
	uploadB    string // an upload's key under B's prefix
}

func TestCrossProjectEveryRouteKeepsToItsProject(t *testing.T) {
	t.Parallel()
	f := setup(t)
	fx := f.seedTenants(t)
	before, beforeB := f.snapshot(t), f.projectRows(t, fx)
	ops := slices.Sorted(func(yield func(string) bool) {
		for k := range apiContract {
			if !yield(k) {
				return
			}
		}
	})
	checked := 0
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		if op == "POST /api/login" || op == "GET /api/openapi.json" || op == "POST /api/logout" {
			continue // public, or the caller's own session
		}
		f.crossOne(t, op, method, path, fx)
		checked++
	}
	t.Logf("%d operations sent with project A's token on project B's resources", checked)
	if after := f.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("the sweep changed something:\n%s", diffLines(before, after))
	}
	if afterB := f.projectRows(t, fx); !slices.Equal(afterB, beforeB) {
		t.Errorf("the sweep changed project B:\n%s", diffLines(beforeB, afterB))
	}
}

// crossOne sends op with A's token on B's resources and judges the answer.
func (f *fixture) crossOne(t *testing.T, op, method, path string, fx tenantFixture) {
	t.Helper()
	spec := apiContract[op]
	target := fillTenantPath(path, fx, false)
	status, body := f.send(t, method, target+crossQuery(op, fx), fx.tokenA, crossBody(op, fx))
	switch {
	case spec.Scope != contract.ScopeProject:
		if status != http.StatusForbidden {
			t.Errorf("%s (x-scope %s) with a project's token: %d, want 403: %s", op, spec.Scope, status, body)
		}
		return
	case strings.Contains(path, "{"):
		if status != http.StatusNotFound {
			t.Errorf("%s on project B's resource with A's token: %d, want 404: %s", op, status, body)
			return
		}
		// The same answer as for an id that does not exist.
		missing := fillTenantPath(path, fx, true)
		s2, b2 := f.send(t, method, missing, fx.tokenA, crossBody(op, fx))
		if s2 != status || maskIDs(b2, missing) != maskIDs(body, target) {
			t.Errorf("%s: B's id answers %d %s, an unknown id %d %s: want the same", op, status, body, s2, b2)
		}
		return
	}
	if msg := judge(op, sweepRequest{method: method}, &http.Response{StatusCode: status,
		Header: http.Header{"X-Content-Type-Options": {"nosniff"}, "Www-Authenticate": {"Bearer"}}}, body); msg != "" {
		t.Errorf("%s with A's token: %s", op, msg)
	}
	sent := target + crossQuery(op, fx) + string(crossBody(op, fx))
	for _, mark := range fx.marksOfB() {
		if bytes.Contains(body, []byte(mark)) && !strings.Contains(sent, strings.Trim(mark, `"`)) { // an echo of the request is no leak
			t.Errorf("%s with A's token shows project B's %s: %s", op, mark, cutBody(body))
		}
	}
}

// crossBody is what each change is sent with: a body asking for B's
// things where a body can.
func crossBody(op string, fx tenantFixture) []byte {
	switch op {
	case "POST /api/tasks":
		return []byte(`{"sourceVideoKey": "` + fx.uploadB + `"}`)
	case "POST /api/uploads":
		return []byte(`{"project": "` + fx.b + `"}`)
	case "POST /api/projects":
		return []byte(`{"id": "` + fx.b + `"}`)
	case "POST /api/projects/{id}/tokens":
		return []byte(`{"name": "sneak", "role": "admin"}`)
	case "POST /api/compensations/requeue":
		return []byte(`{"limit": 100}`)
	}
	return []byte(`{}`) // a bulk action over every dead letter, a replay, a cancel...
}

// crossQuery asks a list for B's things where its query can.
func crossQuery(op string, fx tenantFixture) string {
	if op == "GET /api/tasks" {
		return "?project=" + fx.b + "&includeChildren=true"
	}
	return ""
}

// fillTenantPath fills path with B's resources, or with ids nothing has.
func fillTenantPath(path string, fx tenantFixture, missing bool) string {
	task, dl, project, token := fx.taskB.String(), strconv.FormatInt(fx.deadLetter, 10), fx.b, fx.tokenBID.String()
	if missing {
		task, dl, project, token = uuid.NewString(), "987654321", "no-such-project", uuid.NewString()
	}
	values := map[string]string{"step": "asr", "key": "queue.central_batch_size", "agentId": uuid.NewString()}
	switch {
	case strings.HasPrefix(path, "/api/tasks/"):
		values["id"] = task
	case strings.HasPrefix(path, "/api/dead-letters/"):
		values["id"] = dl
	case strings.HasPrefix(path, "/api/projects/"):
		values["id"] = project
	case strings.HasPrefix(path, "/api/tokens/"):
		values["id"] = token
	default:
		values["id"] = uuid.NewString()
	}
	for k, v := range values {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	return path
}

// maskIDs replaces the path's last id-like segments in an answer, so that
// two answers naming different ids compare equal.
func maskIDs(body []byte, path string) string {
	out := string(body)
	for _, seg := range strings.Split(path, "/") {
		if seg != "" && seg != "api" && (len(seg) >= 8 || strings.ContainsAny(seg, "0123456789")) {
			out = strings.ReplaceAll(out, seg, "ID")
		}
	}
	return out
}

func cutBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// marksOfB are strings only B's resources contain.
func (fx tenantFixture) marksOfB() []string {
	return []string{fx.taskB.String(), fx.compB.String(), fx.tokenBID.String(), fx.uploadB, `"` + fx.b + `"`}
}

// send sends a request with a bearer token and a JSON body (changes only)
// and returns the status and the body (the first event of a stream).
func (f *fixture) send(t *testing.T, method, path, token string, body []byte) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rd io.Reader
	if method != http.MethodGet {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, nil // streams: TestCrossProjectEventsStayInTheirProject
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// seedTenants makes projects A and B with an admin token each, a task of
// A's, and B's task with a dead letter, compensating task, token and
// upload.
func (f *fixture) seedTenants(t *testing.T) tenantFixture {
	t.Helper()
	ctx := context.Background()
	fx := tenantFixture{a: "proj-a-" + strconv.Itoa(int(time.Now().UnixNano()%1e6)), b: "proj-b-" + strconv.Itoa(int(time.Now().UnixNano()%1e6))}
	for _, p := range []string{fx.a, fx.b} {
		f.doJSON(t, "POST", "/api/projects", map[string]any{"id": p}, http.StatusCreated, nil)
	}
	var ta, tb struct {
		ID    uuid.UUID `json:"id"`
		Token string    `json:"token"`
	}
	f.doJSON(t, "POST", "/api/projects/"+fx.a+"/tokens", map[string]any{"name": "a-admin", "role": "admin"}, http.StatusCreated, &ta)
	f.doJSON(t, "POST", "/api/projects/"+fx.b+"/tokens", map[string]any{"name": "b-admin", "role": "admin"}, http.StatusCreated, &tb)
	fx.tokenA, fx.tokenB, fx.tokenBID = ta.Token, tb.Token, tb.ID
	fx.taskA = f.insertProjectTask(t, fx.a, "failed")
	fx.taskB = f.insertProjectTask(t, fx.b, "failed")
	fx.compB = f.insertProjectTask(t, fx.b, "compensating")
	for _, id := range []uuid.UUID{fx.taskB, fx.compB} {
		if _, err := f.pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, attempt, status, worker, started_at, finished_at)
			VALUES ($1, 'translate', 1, 'succeeded', 'w', now(), now())`, id); err != nil {
			t.Fatal(err)
		}
	}
	env, _ := wire.New(wire.StepASR, fx.taskB, "trace", payloadOf("asr", fx.taskB))
	msg, _ := env.Marshal()
	if err := f.pool.QueryRow(ctx, `INSERT INTO dead_letters (message_id, task_id, step, attempt, failure_reason,
		original_message) VALUES ('mb', $1, 'asr', 1, 'engine down', $2) RETURNING id`, fx.taskB, msg).Scan(&fx.deadLetter); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO metric_samples (series, key, at, value)
		VALUES ('project_tasks_done', $1, now() - interval '1 minute', 1), ('project_tasks_done', $2, now() - interval '1 minute', 2)`,
		fx.a, fx.b); err != nil {
		t.Fatal(err)
	}
	fx.uploadB = uploads.Key(fx.b, uuid.New())
	if err := f.srv.objects.Put(ctx, fx.uploadB, strings.NewReader("not a video"), 11, "video/mp4"); err != nil {
		t.Fatal(err)
	}
	return fx
}

// insertProjectTask adds a task of project in status.
func (f *fixture) insertProjectTask(t *testing.T, project, status string) uuid.UUID {
	t.Helper()
	id := f.insertTask(t, status, time.Now())
	if _, err := f.pool.Exec(context.Background(), `UPDATE tasks SET project = $2 WHERE id = $1`, id, project); err != nil {
		t.Fatal(err)
	}
	return id
}

// projectRows is every row of B's (its tasks, their steps, segments and
// dead letters, its project and tokens) and its objects, one a line.
func (f *fixture) projectRows(t *testing.T, fx tenantFixture) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, q := range []string{
		`SELECT t::text FROM tasks t WHERE project = $1`,
		`SELECT s::text FROM task_steps s JOIN tasks t ON t.id = s.task_id WHERE t.project = $1`,
		`SELECT g::text FROM segments g JOIN tasks t ON t.id = g.task_id WHERE t.project = $1`,
		`SELECT d::text FROM dead_letters d JOIN tasks t ON t.id = d.task_id WHERE t.project = $1`,
		`SELECT p::text FROM projects p WHERE id = $1`,
		`SELECT k::text FROM api_tokens k WHERE project = $1`,
		`SELECT o::text FROM outbox o`,
	} {
		if !strings.Contains(q, "$1") {
			q += ` WHERE $1 <> ''`
		}
		rows, err := f.pool.Query(ctx, q, fx.b)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		rows.Close()
	}
	for _, key := range f.objectsUnder(t, uploads.Prefix+fx.b+"/") {
		out = append(out, "object "+key)
	}
	slices.Sort(out)
	return out
}

// TestCrossProjectEventsStayInTheirProject: A's stream of every task's
// events carries A's changes and never B's, even when B's change comes
// first; B's stream carries B's.
func TestCrossProjectEventsStayInTheirProject(t *testing.T) {
	t.Parallel()
	f := setup(t)
	fx := f.seedTenants(t)
	streamA := f.openStreamAs(t, "/api/events", fx.tokenA)
	streamB := f.openStreamAs(t, "/api/events", fx.tokenB)
	ctx := context.Background()
	// B's task changes, then A's: the hub sends changes in their order, so
	// A's event arrives after a leaked B event would have.
	for _, id := range []uuid.UUID{fx.taskB, fx.taskA} {
		if _, err := f.pool.Exec(ctx, `UPDATE tasks SET status = 'running', updated_at = now() WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	sawA := false
	for !sawA {
		name, data, err := streamA.next()
		if err != nil {
			t.Fatalf("A's stream: %v", err)
		}
		if strings.Contains(data, fx.taskB.String()) || strings.Contains(data, `"project":"`+fx.b+`"`) {
			t.Fatalf("A's stream carried B's %s event: %s", name, data)
		}
		sawA = name == "task" && strings.Contains(data, fx.taskA.String())
	}
	for {
		name, data, err := streamB.next()
		if err != nil {
			t.Fatalf("B's stream: %v", err)
		}
		if strings.Contains(data, fx.taskA.String()) {
			t.Fatalf("B's stream carried A's %s event: %s", name, data)
		}
		if name == "task" && strings.Contains(data, fx.taskB.String()) {
			break
		}
	}
	// A's stream of B's task is no stream: 404 before anything is sent.
	if status, _ := f.send(t, "GET", "/api/tasks/"+fx.taskB.String()+"/events", fx.tokenA, nil); status != http.StatusNotFound {
		t.Errorf("A on B's task's events: %d, want 404", status)
	}
}

// openStreamAs opens an event stream with token until the test ends.
func (f *fixture) openStreamAs(t *testing.T, path, token string) *sseReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d: %s", path, resp.StatusCode, b)
	}
	return &sseReader{r: bufioReader(resp.Body)}
}

// TestProjectTokensLifecycle: a project's token is answered once and
// listed without its secret; it works as a bearer token and for a login,
// with its role; revoked through one replica it is refused by another at
// its next request, and so are the sessions made from it; an expired one
// is refused; a read token cannot act and an operator cannot manage tokens.
func TestProjectTokensLifecycle(t *testing.T) {
	t.Parallel()
	f := setup(t)
	other := f.replica(t)
	f.doJSON(t, "POST", "/api/projects", map[string]any{"id": "acme", "name": "Acme", "dailySharedMinutes": 30}, http.StatusCreated, nil)
	f.doJSON(t, "POST", "/api/projects", map[string]any{"id": "acme"}, http.StatusConflict, nil)
	var op, rd struct {
		ID    uuid.UUID `json:"id"`
		Token string    `json:"token"`
		Role  string    `json:"role"`
	}
	f.doJSON(t, "POST", "/api/projects/acme/tokens", map[string]any{"name": "ci", "role": "operator",
		"expiresAt": time.Now().Add(time.Hour).Format(time.RFC3339)}, http.StatusCreated, &op)
	f.doJSON(t, "POST", "/api/projects/acme/tokens", map[string]any{"name": "viewer", "role": "read"}, http.StatusCreated, &rd)
	if !strings.HasPrefix(op.Token, "dft_") || op.Role != "operator" {
		t.Fatalf("created token: %+v", op)
	}
	var list struct {
		Tokens []map[string]any `json:"tokens"`
	}
	resp := f.do(t, "GET", "/api/projects/acme/tokens", adminToken, "", nil)
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Tokens) != 2 {
		t.Fatalf("token list: %v %s", err, raw)
	}
	if bytes.Contains(raw, []byte(op.Token)) || bytes.Contains(raw, []byte("dft_")) {
		t.Fatalf("the token list shows a secret: %s", raw)
	}
	var digest []byte
	if err := f.pool.QueryRow(context.Background(), `SELECT digest FROM api_tokens WHERE id = $1`, op.ID).Scan(&digest); err != nil || bytes.Contains(digest, []byte(op.Token)) || len(digest) != 32 {
		t.Fatalf("stored: %x (%v), want the SHA-256 only", digest, err)
	}
	// Roles: the read token cannot act, the operator cannot manage tokens
	// nor reach the installation's routes.
	checkStatus(t, other, "POST", "/api/dead-letters/replay", rd.Token, `{"dryRun": true}`, http.StatusForbidden)
	checkStatus(t, other, "POST", "/api/dead-letters/replay", op.Token, `{"dryRun": true}`, http.StatusOK)
	checkStatus(t, other, "POST", "/api/projects/acme/tokens", op.Token, `{"name": "x", "role": "admin"}`, http.StatusForbidden)
	checkStatus(t, other, "GET", "/api/workers", op.Token, "", http.StatusForbidden)
	var sess sessionView
	checkJSON(t, other, "GET", "/api/session", op.Token, &sess)
	if sess.Project != "acme" || sess.Role != "operator" || sess.Name != "acme/ci" {
		t.Fatalf("session of the operator's token: %+v", sess)
	}
	cookie, _ := f.login(t, op.Token)
	// Revoked through one replica, refused by the other at once.
	f.doJSON(t, "DELETE", "/api/tokens/"+op.ID.String(), nil, http.StatusOK, nil)
	checkStatus(t, other, "GET", "/api/tasks", op.Token, "", http.StatusUnauthorized)
	req, _ := http.NewRequest("GET", other.URL+"/api/tasks", nil)
	req.AddCookie(cookie)
	if r2, err := http.DefaultClient.Do(req); err != nil || r2.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a session of the revoked token: %v %v, want 401", err, r2)
	}
	checkStatus(t, other, "GET", "/api/tasks", rd.Token, "", http.StatusOK)
	// Expired: refused.
	if _, err := f.pool.Exec(context.Background(), `UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, rd.ID); err != nil {
		t.Fatal(err)
	}
	checkStatus(t, other, "GET", "/api/tasks", rd.Token, "", http.StatusUnauthorized)
}

// replica is a second console on the fixture's database and bucket.
func (f *fixture) replica(t *testing.T) *httpServer {
	t.Helper()
	o := f.srv
	s := &server{cfg: o.cfg, log: o.log, pool: o.pool, objects: o.objects, signer: o.signer, pub: o.pub, queues: o.queues,
		events: o.events, auth: newAuth(o.cfg), logins: ratelimit.New(o.cfg.LoginPerMinute, o.cfg.LoginBurst)}
	return newHTTPServer(t, s.Handler())
}

func checkStatus(t *testing.T, hs *httpServer, method, path, token, body string, want int) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, hs.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
}

func checkJSON(t *testing.T, hs *httpServer, method, path, token string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, hs.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, out) != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
}

// httpServer is a console served by httptest.
type httpServer = httptest.Server

func newHTTPServer(t *testing.T, h http.Handler) *httpServer {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// TestEveryOperationSaysItsScope: every operation of openapi.json says
// whether a project's token may call it (x-scope); one that does not is
// refused to project tokens (system) until it says so.
func TestEveryOperationSaysItsScope(t *testing.T) {
	for op, spec := range apiContract {
		if spec.Scope == "" {
			t.Errorf("%s: no x-scope (project or system) in openapi.json; project tokens get 403 until it has one", op)
		}
	}
}

// TestProjectHistoryIsItsOwn: a project's token reads the per-project
// series of the metric history, its own project's line only, and is
// refused the installation's series.
func TestProjectHistoryIsItsOwn(t *testing.T) {
	t.Parallel()
	f := setup(t)
	fx := f.seedTenants(t)
	status, body := f.send(t, "GET", "/api/metrics/history?since=1h", fx.tokenA, nil)
	var h history.Report
	if status != http.StatusOK || json.Unmarshal(body, &h) != nil || len(h.Series) != 2 {
		t.Fatalf("A's history: %d %s", status, body)
	}
	if h.Series[0].Name != "project_tasks_done" || len(h.Series[0].Lines) != 1 || h.Series[0].Lines[0].Key != fx.a {
		t.Errorf("A's project_tasks_done: %+v, want its own line only", h.Series[0])
	}
	if status, body := f.send(t, "GET", "/api/metrics/history?series=queue_depth", fx.tokenA, nil); status != http.StatusForbidden {
		t.Errorf("A asking for queue_depth: %d %s, want 403", status, body)
	}
	var all history.Report
	f.doJSON(t, "GET", "/api/metrics/history?series=project_tasks_done", nil, http.StatusOK, &all)
	if len(all.Series) != 1 || len(all.Series[0].Lines) != 2 {
		t.Errorf("an admin's project_tasks_done: %+v, want both projects' lines", all.Series)
	}
}
