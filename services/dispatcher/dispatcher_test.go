package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

const testToken = "test-token-0123456789abcdef"

// dispatcher is one running dispatcher, reached over HTTP.
type dispatcher struct {
	base string // the public API
	ops  string // health, readiness and metrics
	// log is what a process (startProcess) wrote so far.
	log *lockedBuffer
}

// lockedBuffer is a process's output, read while it is written.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// call sends a request with the token and decodes a JSON answer into out
// (when non-nil); it returns the status code.
func (d dispatcher) call(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	return d.send(t, method, path, nil, body, out)
}

// send is call with extra headers.
func (d dispatcher) send(t *testing.T, method, path string, headers map[string]string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" && resp.StatusCode != 204 {
		t.Errorf("%s %s: content type %q, body %s", method, path, ct, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Errorf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

// testEnv is the environment of a dispatcher on db and vhost.
func testEnv(t *testing.T, dbURL, amqpURL string, extra map[string]string) map[string]string {
	env := map[string]string{
		"DATABASE_URL":                      dbURL,
		"AMQP_URL":                          amqpURL,
		"DISPATCHER_HTTP_ADDR":              testenv.FreeAddr(t),
		"OPS_ADDR":                          testenv.FreeAddr(t),
		"DISPATCHER_API_TOKEN":              testToken,
		"QUEUE_PROCESS_INTERVAL_SECONDS":    "0.2",
		"QUEUE_PROCESS_RETRY_DELAY_SECONDS": "3600",
		"QUEUE_RESERVATION_TIMEOUT_SECONDS": "0",
		"WORKER_CONCURRENCY":                "4",
		"LOG_LEVEL":                         "warn",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// buildBinary builds the dispatcher into a temporary folder.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dispatcher")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	return bin
}

// startProcess runs the binary with env and stops it (SIGTERM, then a
// check that it exited 0) when the test ends.
func startProcess(t *testing.T, bin string, env map[string]string) dispatcher {
	t.Helper()
	cmd := exec.Command(bin)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("dispatcher exited with %v; output:\n%s", err, out.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("dispatcher did not stop on SIGINT; output:\n%s", out.String())
		}
	})
	d := dispatcher{base: "http://" + env["DISPATCHER_HTTP_ADDR"], ops: "http://" + env["OPS_ADDR"], log: out}
	waitReady(t, d, done, out)
	return d
}

// startInProcess runs run() with env until the test ends.
func startInProcess(t *testing.T, env map[string]string) dispatcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, env) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	d := dispatcher{base: "http://" + env["DISPATCHER_HTTP_ADDR"], ops: "http://" + env["OPS_ADDR"]}
	waitReady(t, d, done, nil)
	return d
}

func waitReady(t *testing.T, d dispatcher, done chan error, out *lockedBuffer) {
	t.Helper()
	testenv.EventuallyWithin(t, 60*time.Second, "the dispatcher at "+d.ops+" to be ready", func() bool {
		select {
		case err := <-done:
			done <- err
			log := ""
			if out != nil {
				log = out.String()
			}
			t.Fatalf("dispatcher exited early: %v\n%s", err, log)
		default:
		}
		resp, err := http.Get(d.ops + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// eventCollector consumes event.waiting.* from the test's virtual host.
type eventCollector struct {
	mu     sync.Mutex
	events []wire.Event
}

func collectEvents(t *testing.T, amqpURL string) *eventCollector {
	t.Helper()
	deliveries := brokertest.Listen(t, amqpURL, "event.waiting.*")
	c := &eventCollector{}
	go func() {
		for d := range deliveries {
			ev, err := wire.DecodeEvent(d.Body)
			if err != nil {
				t.Errorf("invalid event %s: %v", d.Body, err)
				continue
			}
			c.mu.Lock()
			c.events = append(c.events, *ev)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *eventCollector) count(event string) (n int, distinct int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[uuid.UUID]bool{}
	for _, e := range c.events {
		if e.Event == event {
			n++
			seen[e.TaskID] = true
		}
	}
	return n, len(seen)
}

type entryJSON struct {
	ID              uuid.UUID  `json:"id"`
	EntryID         uuid.UUID  `json:"entry_id"`
	ProjectID       uuid.UUID  `json:"project_id"`
	VisitorID       uuid.UUID  `json:"visitor_id"`
	Status          string     `json:"status"`
	Position        int        `json:"position"`
	Priority        int        `json:"priority"`
	AssignedStaffID *uuid.UUID `json:"assigned_staff_id"`
	ChannelID       string     `json:"channel_id"`
	ChannelType     *int       `json:"channel_type"`
	RetryCount      int        `json:"retry_count"`
	EnteredAt       time.Time  `json:"entered_at"`
	Code            string     `json:"code"`
	Error           string     `json:"message"`
}

type staffJSON struct {
	ID            uuid.UUID `json:"id"`
	ProjectID     uuid.UUID `json:"project_id"`
	MaxConcurrent int       `json:"max_concurrent"`
	CurrentLoad   int       `json:"current_load"`
}

type statusJSON struct {
	Waiting           int            `json:"waiting"`
	WaitingByPriority map[string]int `json:"waiting_by_priority"`
	AvailableAgents   int            `json:"available_agents"`
	LongestWait       float64        `json:"longest_wait_seconds"`
	Agents            []staffJSON    `json:"agents"`
	Entries           []entryJSON    `json:"entries"`
}

func aiEvent(project, visitor uuid.UUID, urgency string) map[string]any {
	return map[string]any{
		"event_type": "manual_service.request", "project_id": project, "visitor_id": visitor,
		"payload": map[string]any{"reason": "needs a human", "urgency": urgency,
			"session_id": "channel_123@1", "metadata": map[string]any{"k": "v"}},
	}
}

func TestTwoProcessesShareOneQueue(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	events := collectEvents(t, amqpURL)
	bin := buildBinary(t)
	a := startProcess(t, bin, testEnv(t, db.URL, amqpURL, nil))
	b := startProcess(t, bin, testEnv(t, db.URL, amqpURL, nil))
	procs := []dispatcher{a, b}

	projects := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	agentsOf := map[uuid.UUID][]uuid.UUID{}
	for i := 0; i < 5; i++ {
		p := projects[i%3]
		id := uuid.New()
		agentsOf[p] = append(agentsOf[p], id)
		var st staffJSON
		if code := procs[i%2].call(t, "PUT", "/staff/"+id.String(),
			map[string]any{"project_id": p, "availability": "online", "max_concurrent": 2}, &st); code != 200 || st.MaxConcurrent != 2 {
			t.Fatalf("PUT staff: %d %+v", code, st)
		}
	}

	// 200 concurrent enqueues across the 3 projects, half on each process.
	urgencies := []string{"low", "normal", "high", "urgent"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	responses := map[uuid.UUID]entryJSON{}
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r entryJSON
			code := procs[i%2].call(t, "POST", "/internal/ai/events",
				aiEvent(projects[i%3], uuid.New(), urgencies[rand.IntN(4)]), &r)
			if code != 200 || (r.Status != "waiting" && r.Status != "assigned") || r.ChannelID != "channel_123" ||
				r.ChannelType == nil || *r.ChannelType != 1 {
				t.Errorf("enqueue: %d %+v", code, r)
				return
			}
			mu.Lock()
			responses[r.EntryID] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() || len(responses) != 200 {
		t.Fatalf("%d distinct entries from 200 enqueues", len(responses))
	}

	// Exactly 10 assignments, no agent over capacity, nobody assigned twice.
	ctx := context.Background()
	assigned := func() int {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM visitor_waiting_queue WHERE status = 'assigned'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.EventuallyWithin(t, 20*time.Second, "10 assignments", func() bool { return assigned() == 10 })
	testenv.EventuallyWithin(t, 20*time.Second, "10 assigned events", func() bool { n, _ := events.count("waiting.assigned"); return n >= 10 })
	var bad int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM staff s WHERE current_load <> 2
		OR current_load <> (SELECT count(*) FROM visitor_waiting_queue w WHERE w.assigned_staff_id = s.id)`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Fatalf("%d agents not exactly at capacity 2 with matching assignments", bad)
	}
	if n, distinct := events.count("waiting.assigned"); n != 10 || distinct != 10 {
		t.Fatalf("assigned events: %d for %d entries, want 10 for 10", n, distinct)
	}

	// Positions of the rest: exact, gap-free, in service order, and the same
	// through either process and through the entry itself.
	waiting := 0
	for _, p := range projects {
		var st statusJSON
		if code := procs[0].call(t, "GET", "/queue/projects/"+p.String()+"/status", nil, &st); code != 200 {
			t.Fatalf("status: %d", code)
		}
		if st.Waiting != len(st.Entries) || st.AvailableAgents != 0 || st.LongestWait <= 0 {
			t.Fatalf("status of %s: waiting %d, entries %d, available %d, longest %v", p, st.Waiting, len(st.Entries), st.AvailableAgents, st.LongestWait)
		}
		sum := 0
		for _, n := range st.WaitingByPriority {
			sum += n
		}
		if sum != st.Waiting {
			t.Fatalf("waiting by priority sums to %d, not %d", sum, st.Waiting)
		}
		waiting += st.Waiting
		for i, e := range st.Entries {
			if e.Position != i+1 {
				t.Fatalf("entry %d of %s at position %d", i, p, e.Position)
			}
			if i > 0 && e.Priority > st.Entries[i-1].Priority {
				t.Fatalf("priority %d after %d", e.Priority, st.Entries[i-1].Priority)
			}
			if i%7 == 0 {
				var one entryJSON
				procs[1].call(t, "GET", "/queue/entries/"+e.ID.String(), nil, &one)
				if one.Position != e.Position || one.Status != "waiting" {
					t.Fatalf("entry %s: position %d via entry, %d via status", e.ID, one.Position, e.Position)
				}
			}
		}
	}
	if waiting != 190 {
		t.Fatalf("%d waiting, want 190", waiting)
	}

	// Releasing capacity assigns the next entry by priority, then arrival.
	p0 := projects[0]
	var before statusJSON
	procs[1].call(t, "GET", "/queue/projects/"+p0.String()+"/status", nil, &before)
	head, second := before.Entries[0], before.Entries[1]
	agent := agentsOf[p0][0]
	var st staffJSON
	if code := procs[1].call(t, "POST", "/staff/"+agent.String()+"/release", nil, &st); code != 200 || st.CurrentLoad != 2 {
		t.Fatalf("release: %d, load after matching %d (want 2: freed and taken again)", code, st.CurrentLoad)
	}
	var got entryJSON
	procs[0].call(t, "GET", "/queue/entries/"+head.ID.String(), nil, &got)
	if got.Status != "assigned" || got.AssignedStaffID == nil || *got.AssignedStaffID != agent || got.Position != 0 {
		t.Fatalf("head after release: %+v", got)
	}
	procs[0].call(t, "GET", "/queue/entries/"+second.ID.String(), nil, &got)
	if got.Position != 1 {
		t.Fatalf("second entry now at %d, want 1", got.Position)
	}

	// Cancel: only while waiting, idempotent.
	for i := 0; i < 2; i++ {
		var c entryJSON
		if code := procs[i].call(t, "DELETE", "/queue/entries/"+second.ID.String(), nil, &c); code != 200 || c.Status != "cancelled" {
			t.Fatalf("cancel #%d: %d %+v", i+1, code, c)
		}
	}
	var errBody entryJSON
	if code := procs[0].call(t, "DELETE", "/queue/entries/"+head.ID.String(), nil, &errBody); code != 409 || errBody.Error == "" {
		t.Fatalf("cancel of an assigned entry: %d %+v", code, errBody)
	}
	if code := procs[0].call(t, "DELETE", "/queue/entries/"+uuid.NewString(), nil, &errBody); code != 404 {
		t.Fatalf("cancel of an unknown entry: %d", code)
	}
	procs[0].call(t, "GET", "/queue/entries/"+before.Entries[2].ID.String(), nil, &got)
	if got.Position != 1 {
		t.Fatalf("third entry after the head's assignment and the second's cancel: position %d, want 1", got.Position)
	}

	// Duplicate enqueue of a waiting visitor: 409 naming the entry.
	w := before.Entries[5]
	var dup entryJSON
	if code := procs[1].call(t, "POST", "/internal/ai/events", aiEvent(p0, w.VisitorID, "urgent"), &dup); code != 409 || dup.EntryID != w.ID {
		t.Fatalf("duplicate enqueue: %d %+v, want 409 naming %s", code, dup, w.ID)
	}
}

func TestAPIRejectsBadInputWith4xx(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	d := startInProcess(t, testEnv(t, db.URL, testenv.AMQP(t), nil))
	post := func(body string, token string) (int, string) {
		req, _ := http.NewRequest("POST", d.base+"/internal/ai/events", bytes.NewBufferString(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Code  string `json:"code"`
			Error string `json:"message"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if e.Code == "" {
			e.Error = ""
		}
		return resp.StatusCode, e.Error
	}
	p, v := uuid.NewString(), uuid.NewString()
	cases := []struct {
		name, body, token string
		want              int
	}{
		{"no token", `{}`, "", 401},
		{"wrong token", `{}`, "wrong-token-wrong-token", 401},
		{"empty body", ``, testToken, 400},
		{"not JSON", `{"event_type":`, testToken, 400},
		{"unknown event", fmt.Sprintf(`{"event_type":"x.y","project_id":%q,"visitor_id":%q}`, p, v), testToken, 400},
		{"malformed project", fmt.Sprintf(`{"event_type":"manual_service.request","project_id":"nope","visitor_id":%q}`, v), testToken, 400},
		{"missing visitor", fmt.Sprintf(`{"event_type":"manual_service.request","project_id":%q}`, p), testToken, 400},
		{"bad urgency", fmt.Sprintf(`{"event_type":"manual_service.request","project_id":%q,"visitor_id":%q,"payload":{"urgency":"asap"}}`, p, v), testToken, 400},
		{"bad session", fmt.Sprintf(`{"event_type":"manual_service.request","project_id":%q,"visitor_id":%q,"payload":{"session_id":"c@x"}}`, p, v), testToken, 400},
		{"session not channel@type", fmt.Sprintf(`{"event_type":"manual_service.request","project_id":%q,"visitor_id":%q,"payload":{"session_id":"nope"}}`, p, v), testToken, 400},
		{"metadata not object", fmt.Sprintf(`{"event_type":"manual_service.request","project_id":%q,"visitor_id":%q,"payload":{"metadata":[1]}}`, p, v), testToken, 400},
	}
	for _, c := range cases {
		code, msg := post(c.body, c.token)
		if code != c.want || msg == "" {
			t.Errorf("%s: %d %q, want %d with an error message", c.name, code, msg, c.want)
		}
	}
	var e entryJSON
	for _, c := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", "/queue/entries/not-a-uuid", nil, 400},
		{"GET", "/queue/entries/" + uuid.NewString(), nil, 404},
		{"DELETE", "/queue/entries/123", nil, 400},
		{"GET", "/queue/projects/xyz/status", nil, 400},
		{"GET", "/queue/projects/" + uuid.NewString() + "/status?limit=-1", nil, 400},
		{"PUT", "/staff/" + uuid.NewString(), map[string]any{"project_id": p, "availability": "busy", "max_concurrent": 2}, 400},
		{"PUT", "/staff/" + uuid.NewString(), map[string]any{"project_id": p, "availability": "online"}, 400},
		{"PUT", "/staff/" + uuid.NewString(), map[string]any{"project_id": p, "availability": "online", "max_concurrent": -1}, 400},
		{"POST", "/staff/" + uuid.NewString() + "/release", nil, 404},
		{"GET", "/nowhere", nil, 404},
	} {
		e = entryJSON{}
		if code := d.call(t, c.method, c.path, c.body, &e); code != c.want || e.Error == "" || e.Code == "" {
			t.Errorf("%s %s: %d %q, want %d with an error message", c.method, c.path, code, e.Error, c.want)
		}
	}
	// An idle agent has nothing to release.
	staff := uuid.NewString()
	d.call(t, "PUT", "/staff/"+staff, map[string]any{"project_id": p, "availability": "away", "max_concurrent": 1}, nil)
	if code := d.call(t, "POST", "/staff/"+staff+"/release", nil, &e); code != 409 {
		t.Errorf("release of an idle agent: %d, want 409", code)
	}
}

// publish sends one envelope to task_exchange.
func publish(t *testing.T, amqpURL, step string, taskID uuid.UUID, payload any) {
	t.Helper()
	env, err := wire.New(step, taskID, wire.NewTraceID(), payload)
	if err != nil {
		t.Fatalf("envelope for %s: %v", step, err)
	}
	body, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := brokertest.Channel(t, amqpURL).Publish(wire.Exchange, wire.RoutingKey(step), true, false,
		amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body}); err != nil {
		t.Fatal(err)
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	d := startInProcess(t, testEnv(t, db.URL, amqpURL, nil))
	project, staff := uuid.New(), uuid.New()

	// waiting.capacity set: an agent of capacity 1 comes online.
	publish(t, amqpURL, wire.StepWaitingCapacity, uuid.New(), map[string]any{
		"staff_id": staff, "action": "set", "project_id": project, "availability": "online", "max_concurrent": 1})
	var st staffJSON
	testenv.EventuallyWithin(t, 20*time.Second, "agent online", func() bool { return d.call(t, "GET", "/staff/"+staff.String(), nil, &st) == 200 })

	// waiting.enqueue twice with one task id: one entry, assigned at once.
	first := uuid.New()
	for i := 0; i < 2; i++ {
		publish(t, amqpURL, wire.StepWaitingEnqueue, first, map[string]any{
			"project_id": project, "visitor_id": uuid.New(), "urgency": "high", "session_id": "web_9@2"})
	}
	var e entryJSON
	testenv.EventuallyWithin(t, 20*time.Second, "first entry assigned", func() bool {
		return d.call(t, "GET", "/queue/entries/"+first.String(), nil, &e) == 200 && e.Status == "assigned"
	})
	if e.ChannelID != "web_9" || e.ChannelType == nil || *e.ChannelType != 2 || *e.AssignedStaffID != staff {
		t.Fatalf("entry from a message: %+v", e)
	}

	// waiting.cancel of the second entry, then waiting.capacity release
	// (delivered twice): the freed unit goes to the third entry, once.
	second, third := uuid.New(), uuid.New()
	for _, id := range []uuid.UUID{second, third} {
		publish(t, amqpURL, wire.StepWaitingEnqueue, id, map[string]any{"project_id": project, "visitor_id": uuid.New()})
		testenv.EventuallyWithin(t, 20*time.Second, "entry waiting", func() bool {
			return d.call(t, "GET", "/queue/entries/"+id.String(), nil, &e) == 200 && e.Status == "waiting"
		})
	}
	publish(t, amqpURL, wire.StepWaitingCancel, uuid.New(), map[string]any{"entry_id": second})
	testenv.EventuallyWithin(t, 20*time.Second, "second cancelled", func() bool {
		return d.call(t, "GET", "/queue/entries/"+second.String(), nil, &e) == 200 && e.Status == "cancelled"
	})
	release := uuid.New()
	for i := 0; i < 2; i++ {
		publish(t, amqpURL, wire.StepWaitingCapacity, release, map[string]any{"staff_id": staff, "action": "release"})
	}
	testenv.EventuallyWithin(t, 20*time.Second, "third assigned", func() bool {
		return d.call(t, "GET", "/queue/entries/"+third.String(), nil, &e) == 200 && e.Status == "assigned"
	})
	// A fourth entry stays waiting: the duplicated release freed one unit only.
	fourth := uuid.New()
	publish(t, amqpURL, wire.StepWaitingEnqueue, fourth, map[string]any{"project_id": project, "visitor_id": uuid.New()})
	testenv.EventuallyWithin(t, 20*time.Second, "fourth waiting", func() bool {
		return d.call(t, "GET", "/queue/entries/"+fourth.String(), nil, &e) == 200 && e.Status == "waiting"
	})
	var steps int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM task_steps
		WHERE task_id = $1 AND step = 'waiting_capacity' AND status = 'succeeded'`, release).Scan(&steps); err != nil || steps != 1 {
		t.Fatalf("succeeded task_steps rows of the release: %d (%v), want 1", steps, err)
	}
	d.call(t, "GET", "/staff/"+staff.String(), nil, &st)
	if st.CurrentLoad != 1 {
		t.Fatalf("load after one release and one assignment: %d, want 1", st.CurrentLoad)
	}
}

func TestExpiryFollowsConfiguration(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	events := collectEvents(t, amqpURL)
	d := startInProcess(t, testEnv(t, db.URL, amqpURL, map[string]string{
		"QUEUE_PROCESS_RETRY_DELAY_SECONDS": "0.5", "QUEUE_PROCESS_MAX_RETRIES": "3"}))
	var e entryJSON
	if code := d.call(t, "POST", "/internal/ai/events", aiEvent(uuid.New(), uuid.New(), "low"), &e); code != 200 {
		t.Fatalf("enqueue: %d", code)
	}
	testenv.EventuallyWithin(t, 20*time.Second, "entry expired", func() bool {
		return d.call(t, "GET", "/queue/entries/"+e.EntryID.String(), nil, &e) == 200 && e.Status == "expired"
	})
	// The trigger on enqueue and two scans, each at least the retry delay
	// after the previous attempt.
	if e.RetryCount != 3 {
		t.Fatalf("expired after %d attempts, want 3", e.RetryCount)
	}
	testenv.EventuallyWithin(t, 20*time.Second, "expired event", func() bool { n, _ := events.count("waiting.expired"); return n == 1 })
}
