package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/google/uuid"
)

// The conformance sweep is generated from openapi.json: every operation
// the document describes (and TestOpenAPIDescribesExactlyTheRoutesServed
// keeps the document equal to the routes served, so a new route is swept
// by construction) is sent, against the real console on a real Postgres,
// MinIO, RabbitMQ and dispatcher, every request of the kinds below. Each
// answer must be a status the document lists for the operation, with an
// error code the document lists for that status, never a 5xx, with
// X-Content-Type-Options: nosniff, and an error's text must name nothing
// internal (a Go name, a scratch path, a driver's text). None of the
// requests is valid, so none may leave anything behind: every table's row
// count (but the audit log's, which records attempts), every object of the
// bucket and every queue's messages are the same after the sweep.

// sweepRequest is one request of the sweep and what it must get besides a
// documented answer: a status (0: any documented one).
type sweepRequest struct {
	kind        string // what is wrong with it
	method      string
	path, query string
	token       string
	contentType string
	body        []byte
	want        int
}

// internalText matches what an error must not show: Go's names and
// errors, drivers', paths of the workers' scratch space or of the code.
var internalText = regexp.MustCompile(`(?i)go struct|(?:^|[\s(])json: |sqlstate|pgx|pgconn|/tmp/|dubflow-[a-z_]+-[0-9]|\.go:[0-9]|` +
	`goroutine|runtime error|panic|http: |multipart: |unexpected eof|minio|amqp|x-amz|uuid\.UUID|\bint64\b|\[\]string|` +
	`[a-z]+Body\.[a-z]+|services/|pkg/`)

// sweepFixture holds the rows the valid parts of the requests name, so
// that a request wrong in one way only is judged on that way.
type sweepFixture struct {
	task, project, entry, agent uuid.UUID
	deadLetter                  int64
}

func TestConformanceEveryRouteAnswersAsDocumented(t *testing.T) {
	t.Parallel()
	const dispToken = "dispatcher-token-0123456789"
	f := setup(t)
	f.srv.cfg.DispatcherURL = startQuietDispatcher(t, f.dbURL, dispToken)
	f.srv.cfg.DispatcherToken = dispToken
	fx := f.seedSweep(t)
	before := f.snapshot(t)
	ops := slices.Sorted(func(yield func(string) bool) {
		for k := range apiContract {
			if !yield(k) {
				return
			}
		}
	})
	if len(ops) < 30 {
		t.Fatalf("openapi.json describes %d operations; the sweep needs the document", len(ops))
	}
	sent := 0
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		for _, req := range sweepRequests(method, path, fx) {
			f.sweepOne(t, op, req)
			sent++
		}
	}
	t.Logf("%d operations, %d requests", len(ops), sent)
	if after := f.snapshot(t); !slices.Equal(after, before) {
		t.Errorf("the sweep left something behind:\n%s", diffLines(before, after))
	}
}

// sweepRequests are the requests of the sweep for one operation.
func sweepRequests(method, path string, fx sweepFixture) []sweepRequest {
	spec := apiContract[method+" "+path]
	base := fillPath(path, fx, nil)
	var out []sweepRequest
	add := func(r sweepRequest) {
		if r.method == "" {
			r.method = method
		}
		if r.path == "" {
			r.path = base
		}
		if r.token == "" {
			r.token = adminToken
		}
		out = append(out, r)
	}
	noAuth := 0 // a public route answers as documented
	if _, guarded := spec.Errors[http.StatusUnauthorized]; guarded && path != "/api/login" {
		noAuth = http.StatusUnauthorized
	}
	add(sweepRequest{kind: "no auth", token: "none", want: noAuth})
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if apiContract[m+" "+path] == nil {
			add(sweepRequest{kind: "wrong method", method: m, want: http.StatusMethodNotAllowed})
		}
	}
	post := method == http.MethodPost
	add(sweepRequest{kind: "malformed JSON", contentType: "application/json", body: []byte(`{"reason": "x",`), want: wantIf(post, 400)})
	add(sweepRequest{kind: "oversized body", contentType: "application/json", body: oversized(method, path), want: http.StatusRequestEntityTooLarge})
	add(sweepRequest{kind: "wrong content type", contentType: "text/plain", body: []byte(`{}`), want: wantIf(post, 415)})
	for name, p := range spec.Params {
		if p.In != "path" {
			continue
		}
		for _, v := range badPathValues(p) {
			add(sweepRequest{kind: "path " + name + "=" + v.value, path: fillPath(path, fx, map[string]string{name: v.value}), want: v.want})
		}
	}
	if strings.Contains(path, "{id}") || strings.Contains(path, "{agentId}") {
		unknown := sweepFixture{task: uuid.New(), project: uuid.New(), entry: uuid.New(), agent: uuid.New(), deadLetter: 987654321}
		add(sweepRequest{kind: "unknown id", path: fillPath(path, unknown, nil)})
	}
	add(sweepRequest{kind: "unknown query parameter", query: "bogus=1", want: http.StatusBadRequest})
	for _, name := range spec.Query {
		p := spec.Params[name]
		add(sweepRequest{kind: "query " + name + " twice", query: name + "=1&" + name + "=2", want: http.StatusBadRequest})
		add(sweepRequest{kind: "query " + name + " with NUL", query: name + "=%00", want: http.StatusBadRequest})
		add(sweepRequest{kind: "query " + name + "=bogus", query: name + "=bogus", want: wantIf(p.Type != "string" || len(p.Enum) > 0, 400)})
	}
	return out
}

func wantIf(cond bool, status int) int {
	if cond {
		return status
	}
	return 0
}

// oversized is a JSON body over the route's bound: 1 MiB, or for a task's
// creation the bound of its text fields (maxTaskJSONBytes).
func oversized(method, path string) []byte {
	if method == http.MethodPost && path == "/api/tasks" {
		return bytes.Repeat([]byte(" "), maxTaskJSONBytes+1024)
	}
	return bytes.Repeat([]byte(" "), jsonbody.MaxBytes+1024)
}

// badValue is a malformed path value and the status it must get.
type badValue struct {
	value string
	want  int
}

// badPathValues are the malformed values of a path parameter: traversal
// ("..", encoded or not: refused before routing), and values outside its
// schema.
func badPathValues(p contract.Param) []badValue {
	out := []badValue{{"..", 400}, {"%2e%2e", 400}, {"%2E.", 400}, {"%00", 400}}
	switch {
	case p.Format == "uuid":
		out = append(out, badValue{"not-a-uuid", 400}, badValue{uuid.Nil.String(), 400},
			badValue{"{" + uuid.NewString() + "}", 400}, badValue{"urn:uuid:" + uuid.NewString(), 400},
			badValue{strings.ReplaceAll(uuid.NewString(), "-", ""), 400})
	case p.Type == "integer":
		out = append(out, badValue{"0", 400}, badValue{"-1", 400}, badValue{"1.5", 400}, badValue{"99999999999999999999", 400})
	case len(p.Enum) > 0:
		out = append(out, badValue{"bogus", 404})
	}
	return out
}

// fillPath fills path's parameters with the fixture's ids, or with
// override's values.
func fillPath(path string, fx sweepFixture, override map[string]string) string {
	values := map[string]string{"step": "asr", "agentId": fx.agent.String()}
	switch {
	case strings.HasPrefix(path, "/api/tasks/"):
		values["id"] = fx.task.String()
	case strings.HasPrefix(path, "/api/dead-letters/"):
		values["id"] = strconv.FormatInt(fx.deadLetter, 10)
	case strings.HasPrefix(path, "/api/waiting/projects/"):
		values["id"] = fx.project.String()
	case strings.HasPrefix(path, "/api/waiting/entries/"):
		values["id"] = fx.entry.String()
	case strings.HasPrefix(path, "/api/projects/"), strings.HasPrefix(path, "/api/tokens/"):
		values["id"] = fx.project.String() // no project or token has it
	}
	for k, v := range override {
		values[k] = v
	}
	for k, v := range values {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	return path
}

// sweepOne sends req and checks its answer against the document's
// operation op.
func (f *fixture) sweepOne(t *testing.T, op string, req sweepRequest) {
	t.Helper()
	url := f.http.URL + req.path
	if req.query != "" {
		url += "?" + req.query
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, req.method, url, bytes.NewReader(req.body))
	if err != nil {
		t.Fatalf("%s %s: %v", op, req.kind, err)
	}
	if req.token != "none" {
		hr.Header.Set("Authorization", "Bearer "+req.token)
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	if _, pattern := docMux.Handler(hr); req.kind == "wrong method" && pattern != "" {
		// The method and path are another operation's (GET
		// /api/dead-letters/{id} for GET /api/dead-letters/purge): that
		// operation's document judges the answer.
		op, req.want = pattern, 0
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Errorf("%s, %s: %v", op, req.kind, err)
		return
	}
	defer resp.Body.Close()
	var body []byte
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	}
	if msg := judge(op, req, resp, body); msg != "" {
		t.Errorf("%s, %s (%s %s?%s): %s", op, req.kind, req.method, apierr.CutEcho(req.path), req.query, msg)
	}
}

// docMux routes a request to the operation of openapi.json that serves it:
// its pattern is the operation's "METHOD /path".
var docMux = func() *http.ServeMux {
	mux := http.NewServeMux()
	for op := range apiContract {
		mux.Handle(op, http.NotFoundHandler())
	}
	return mux
}()

// judge says what is wrong with an answer to req, "" when nothing.
func judge(op string, req sweepRequest, resp *http.Response, body []byte) string {
	spec := apiContract[op]
	status := resp.StatusCode
	switch {
	case status >= 500:
		return fmt.Sprintf("%d: %s", status, body)
	case req.want != 0 && status != req.want:
		return fmt.Sprintf("status %d, want %d: %s", status, req.want, body)
	case resp.Header.Get("X-Content-Type-Options") != "nosniff":
		return "no X-Content-Type-Options: nosniff"
	case status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "":
		return "405 without Allow"
	case status == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "":
		return "401 without WWW-Authenticate"
	case status < 400:
		if !documentedSuccess(op, status) {
			return fmt.Sprintf("status %d is not documented", status)
		}
		return ""
	}
	codes, ok := spec.Errors[status]
	if !ok {
		return fmt.Sprintf("status %d is not documented: %s", status, body)
	}
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil || e.Message == "" {
		return fmt.Sprintf("%d: not an error document: %s", status, body)
	}
	if !slices.Contains(codes, e.Code) {
		return fmt.Sprintf("%d with code %q; the document lists %v", status, e.Code, codes)
	}
	if m := internalText.FindString(e.Message); m != "" {
		return fmt.Sprintf("the message names something internal (%q): %s", m, e.Message)
	}
	return ""
}

// documentedSuccess reports whether openapi.json lists the success status
// for op.
func documentedSuccess(op string, status int) bool {
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	_ = json.Unmarshal(openapiDoc, &doc)
	method, path, _ := strings.Cut(op, " ")
	_, ok := doc.Paths[path][strings.ToLower(method)].Responses[strconv.Itoa(status)]
	return ok
}

// seedSweep adds what the sweep's paths name: a task, a dead letter, a
// waiting entry of a project.
func (f *fixture) seedSweep(t *testing.T) sweepFixture {
	t.Helper()
	ctx := context.Background()
	fx := sweepFixture{task: f.insertTask(t, "failed", time.Now()), project: uuid.New(), entry: uuid.New(), agent: uuid.New()}
	env, _ := wire.New(wire.StepASR, fx.task, "trace", payloadOf("asr", fx.task))
	msg, _ := env.Marshal()
	if err := f.pool.QueryRow(ctx, `INSERT INTO dead_letters (message_id, task_id, step, attempt, failure_reason,
		original_message) VALUES ('m1', $1, 'asr', 1, 'engine down', $2) RETURNING id`, fx.task, msg).Scan(&fx.deadLetter); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO visitor_waiting_queue (id, project_id, visitor_id, source, priority, entered_at)
		VALUES ($1, $2, $3, 'visitor', 1, now())`, fx.entry, fx.project, uuid.New()); err != nil {
		t.Fatal(err)
	}
	return fx
}

// snapshot lists every table's row count but the audit log's, every
// object of the bucket and every queue's ready messages, one a line.
func (f *fixture) snapshot(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := f.pool.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'console_audit'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	var out []string
	for _, table := range tables {
		var n int
		if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM "`+table+`"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("table %s: %d rows", table, n))
	}
	for _, key := range f.objectsUnder(t, "") {
		out = append(out, "object "+key)
	}
	var names []string
	for _, q := range inspect.Watched() {
		names = append(names, q.Name)
	}
	states, err := f.srv.queues.Inspect(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		out = append(out, fmt.Sprintf("queue %s: %d ready", name, states[name].Ready))
	}
	sort.Strings(out)
	return out
}

// diffLines lists the lines only one of a and b has.
func diffLines(a, b []string) string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// startQuietDispatcher runs the real dispatcher on the database at dbURL,
// its scan off (it changes nothing on its own), until the test ends, and
// returns its API's URL.
func startQuietDispatcher(t *testing.T, dbURL, token string) string {
	t.Helper()
	dir, err := testenv.SharedBinaries("dispatcher")
	if err != nil {
		t.Fatal(err)
	}
	api, ops := testenv.FreeAddr(t), testenv.FreeAddr(t)
	cmd := exec.Command(filepath.Join(dir, "dispatcher"))
	cmd.Env = []string{"DATABASE_URL=" + dbURL, "AMQP_URL=" + testenv.AMQP(t), "DISPATCHER_HTTP_ADDR=" + api,
		"OPS_ADDR=" + ops, "DISPATCHER_API_TOKEN=" + token, "LOG_LEVEL=warn", "QUEUE_PROCESS_ENABLED=false"}
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
