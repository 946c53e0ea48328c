package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

type itemJSON struct {
	ID       uuid.UUID `json:"id"`
	AgentID  uuid.UUID `json:"agentId"`
	OrderID  uuid.UUID `json:"orderId"`
	TaskID   uuid.UUID `json:"taskId"`
	Status   string    `json:"status"`
	Position int       `json:"position"`
	Code     string    `json:"code"`
	Message  string    `json:"message"`
}

type agentStatusJSON struct {
	QueuedCount int        `json:"queuedCount"`
	Capacity    int        `json:"capacity"`
	Available   int        `json:"available"`
	Items       []itemJSON `json:"items"`
}

// callWith is call with extra headers.
func (d dispatcher) callWith(t *testing.T, method, path string, headers map[string]string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, d.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		decodeBody(t, resp, out)
	}
	return resp.StatusCode
}

func TestAgentQueueAPI(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	env := testEnv(t, db.URL, testenv.AMQP(t), map[string]string{"QUEUE_MAX_N": "3"})
	d := startInProcess(t, env)
	agent := uuid.New()
	base := "/queue/agents/" + agent.String()
	orders := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	for i, o := range orders {
		var it itemJSON
		if code := d.send(t, "POST", base+"/orders", owner, map[string]any{"orderId": o, "taskId": uuid.New()}, &it); code != 201 ||
			it.OrderID != o || it.AgentID != agent || it.Status != "queued" || it.Position != i+1 {
			t.Fatalf("enqueue %d: %d %+v", i, code, it)
		}
	}
	var e itemJSON
	if code := d.send(t, "POST", base+"/orders", owner, map[string]any{"orderId": uuid.New(), "taskId": uuid.New()}, &e); code != 400 || e.Code != "BUSINESS_QUEUE_FULL" || e.Message == "" {
		t.Fatalf("enqueue into a full queue: %d %+v", code, e)
	}
	var st agentStatusJSON
	if code := d.call(t, "GET", base+"/status", nil, &st); code != 200 || st.QueuedCount != 3 || st.Capacity != 3 || st.Available != 0 || len(st.Items) != 3 {
		t.Fatalf("status: %d %+v", code, st)
	}
	for i, it := range st.Items {
		if it.OrderID != orders[i] {
			t.Fatalf("status item %d is order %s, want %s (arrival order)", i, it.OrderID, orders[i])
		}
	}
	var pos struct {
		Position int `json:"position"`
	}
	if code := d.callWith(t, "GET", "/queue/orders/"+orders[1].String()+"/position", map[string]string{"x-agent-id": agent.String()}, &pos); code != 200 || pos.Position != 2 {
		t.Fatalf("position: %d %+v", code, pos)
	}
	e = itemJSON{}
	if code := d.callWith(t, "GET", "/queue/orders/"+orders[1].String()+"/position", nil, &e); code != 400 || e.Code != "VALIDATION_ERROR" {
		t.Fatalf("position without x-agent-id: %d %+v", code, e)
	}
	e = itemJSON{}
	if code := d.callWith(t, "GET", "/queue/orders/"+uuid.NewString()+"/position", map[string]string{"x-agent-id": agent.String()}, &e); code != 404 || e.Code != "NOT_FOUND" {
		t.Fatalf("position of an unknown order: %d %+v", code, e)
	}

	// Cancel the first: needs x-user-id; twice and unknown are quiet.
	e = itemJSON{}
	if code := d.callWith(t, "DELETE", base+"/orders/"+orders[0].String(), nil, &e); code != 400 || e.Code != "VALIDATION_ERROR" {
		t.Fatalf("cancel without x-user-id: %d %+v", code, e)
	}
	user := map[string]string{"x-user-id": "user-7"}
	for i, want := range []bool{true, false} {
		var c struct {
			Cancelled bool `json:"cancelled"`
		}
		if code := d.callWith(t, "DELETE", base+"/orders/"+orders[0].String(), user, &c); code != 200 || c.Cancelled != want {
			t.Fatalf("cancel #%d: %d %+v", i+1, code, c)
		}
	}
	if code := d.callWith(t, "DELETE", base+"/orders/"+uuid.NewString(), user, nil); code != 200 {
		t.Fatalf("cancel of an unknown order: %d", code)
	}
	// Now there is room, but the second order is still queued: 409.
	e = itemJSON{}
	if code := d.send(t, "POST", base+"/orders", owner, map[string]any{"orderId": orders[1], "taskId": uuid.New()}, &e); code != 409 || e.Code != "BUSINESS_IDEMPOTENCY_VIOLATION" {
		t.Fatalf("duplicate enqueue: %d %+v", code, e)
	}
	if code := d.callWith(t, "GET", "/queue/orders/"+orders[1].String()+"/position", map[string]string{"x-agent-id": agent.String()}, &pos); code != 200 || pos.Position != 1 {
		t.Fatalf("position after the head's cancel: %d %+v", code, pos)
	}

	// Consume-next: oldest first, then 204.
	for _, want := range orders[1:] {
		var it itemJSON
		if code := d.call(t, "POST", base+"/consume-next", nil, &it); code != 200 || it.OrderID != want || it.Status != "consumed" {
			t.Fatalf("consume-next: %d %+v, want order %s", code, it, want)
		}
	}
	if code := d.call(t, "POST", base+"/consume-next", nil, nil); code != 204 {
		t.Fatalf("consume-next on an empty queue: %d, want 204", code)
	}
	if code := d.call(t, "GET", base+"/status", nil, &st); code != 200 || st.QueuedCount != 0 || st.Available != 3 || len(st.Items) != 0 {
		t.Fatalf("status at the end: %d %+v", code, st)
	}
	var size int
	if err := db.Pool.QueryRow(context.Background(), `SELECT queue_size FROM agent_queues WHERE agent_id = $1`, agent).Scan(&size); err != nil || size != 0 {
		t.Fatalf("queue_size at the end: %d %v", size, err)
	}

	// Malformed input and the token: the same {code, message} body.
	for _, c := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"POST", "/queue/agents/nope/orders", map[string]any{"orderId": uuid.New(), "taskId": uuid.New()}, 400},
		{"POST", base + "/orders", map[string]any{"orderId": uuid.New()}, 400},
		{"POST", base + "/orders", map[string]any{"orderId": "x", "taskId": uuid.New()}, 400},
		{"GET", "/queue/agents/123/status", nil, 400},
		{"DELETE", base + "/orders/nope", nil, 400},
	} {
		e = itemJSON{}
		if code := d.send(t, c.method, c.path, owner, c.body, &e); code != c.want || e.Code == "" || e.Message == "" {
			t.Errorf("%s %s: %d %+v, want %d with code and message", c.method, c.path, code, e, c.want)
		}
	}
	if code := d.send(t, "POST", base+"/orders", nil, map[string]any{"orderId": uuid.New(), "taskId": uuid.New()}, &e); code != 400 || e.Code != "VALIDATION_ERROR" {
		t.Fatalf("enqueue without x-user-id: %d %+v", code, e)
	}
}

// TestAgentQueueConsumedOnceAcrossReplicas: two dispatchers on one database,
// many clients calling consume-next through both; every item is handed out
// once and the queue ends empty.
func TestAgentQueueConsumedOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	const items = 100
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	extra := map[string]string{"QUEUE_MAX_N": "100"}
	replicas := []dispatcher{startInProcess(t, testEnv(t, db.URL, amqpURL, extra)), startInProcess(t, testEnv(t, db.URL, amqpURL, extra))}
	agent := uuid.New()
	base := "/queue/agents/" + agent.String()
	for i := 0; i < items; i++ {
		if code := replicas[i%2].send(t, "POST", base+"/orders", owner, map[string]any{"orderId": uuid.New(), "taskId": uuid.New()}, nil); code != 201 {
			t.Fatalf("enqueue %d: %d", i, code)
		}
	}
	var mu sync.Mutex
	got := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var it itemJSON
				code := replicas[c%2].call(t, "POST", base+"/consume-next", nil, &it)
				if code == 204 {
					return
				}
				if code != 200 {
					t.Errorf("consume-next: %d %+v", code, it)
					return
				}
				mu.Lock()
				got[it.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for id, n := range got {
		if n != 1 {
			t.Fatalf("item %s handed out %d times", id, n)
		}
	}
	var st agentStatusJSON
	replicas[0].call(t, "GET", base+"/status", nil, &st)
	if len(got) != items || st.QueuedCount != 0 {
		t.Fatalf("%d items handed out, %d still queued; want %d and 0", len(got), st.QueuedCount, items)
	}
}

// decodeBody decodes a JSON answer into out; an empty body leaves it alone.
func decodeBody(t *testing.T, resp *http.Response, out any) {
	t.Helper()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Errorf("decode %s: %v", data, err)
		}
	}
}

// TestAgentQueueOwnership: only who queued an order cancels it (x-user-id,
// a UUID in any case), an x-agent-id given must be the path's agent, and
// a position asked with x-user-id is answered to the owner only.
func TestAgentQueueOwnership(t *testing.T) {
	t.Parallel()
	d := startInProcess(t, testEnv(t, testenv.Postgres(t).URL, testenv.AMQP(t), nil))
	agent, other, order := uuid.New(), uuid.New(), uuid.New()
	user := uuid.New()
	base := "/queue/agents/" + agent.String()
	if code := d.send(t, "POST", base+"/orders", map[string]string{"x-user-id": strings.ToUpper(user.String())},
		map[string]any{"orderId": order, "taskId": uuid.New()}, nil); code != 201 {
		t.Fatalf("enqueue: %d", code)
	}
	position := "/queue/orders/" + order.String() + "/position"
	for _, c := range []struct {
		name, method, path string
		headers            map[string]string
		want               int
	}{
		{"cancel by another user", "DELETE", base + "/orders/" + order.String(), map[string]string{"x-user-id": "user-8"}, 403},
		{"cancel naming another agent", "DELETE", base + "/orders/" + order.String(), map[string]string{"x-user-id": user.String(), "x-agent-id": other.String()}, 403},
		{"position asked by another user", "GET", position, map[string]string{"x-agent-id": agent.String(), "x-user-id": "user-8"}, 403},
		{"position in another agent's queue", "GET", position, map[string]string{"x-agent-id": other.String(), "x-user-id": user.String()}, 404},
		{"position asked by the owner", "GET", position, map[string]string{"x-agent-id": agent.String(), "x-user-id": user.String()}, 200},
		{"position asked by the agent", "GET", position, map[string]string{"x-agent-id": agent.String()}, 200},
	} {
		var e itemJSON
		if code := d.send(t, c.method, c.path, c.headers, nil, &e); code != c.want || (code == 403 && e.Code != "FORBIDDEN") {
			t.Errorf("%s: %d %+v, want %d", c.name, code, e, c.want)
		}
	}
	var st agentStatusJSON
	if d.call(t, "GET", base+"/status", nil, &st); st.QueuedCount != 1 {
		t.Fatalf("refused cancels took the order out: %+v", st)
	}
	var c struct {
		Cancelled bool `json:"cancelled"`
	}
	if code := d.send(t, "DELETE", base+"/orders/"+order.String(), map[string]string{"x-user-id": user.String(), "x-agent-id": agent.String()}, nil, &c); code != 200 || !c.Cancelled {
		t.Fatalf("cancel by the owner: %d %+v", code, c)
	}
}

// getStatus GETs an agent's status with the given Authorization header
// (none when empty) and decodes it as a generic object.
func getStatus(t *testing.T, d dispatcher, agent uuid.UUID, auth string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", d.base+"/queue/agents/"+agent.String()+"/status", nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	decodeBody(t, resp, &out)
	return resp.StatusCode, out
}

// TestAgentStatusIsPublicAndShowsNoIDs: by default the agent's status needs
// no token and then shows counts, positions and arrival times only; with
// the token the items are whole; QUEUE_AGENT_STATUS_PUBLIC=false makes it
// need the token.
func TestAgentStatusIsPublicAndShowsNoIDs(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	d := startInProcess(t, testEnv(t, db.URL, amqpURL, nil))
	agent := uuid.New()
	for range 2 {
		if code := d.send(t, "POST", "/queue/agents/"+agent.String()+"/orders", owner, map[string]any{"orderId": uuid.New(), "taskId": uuid.New()}, nil); code != 201 {
			t.Fatalf("enqueue: %d", code)
		}
	}
	for _, auth := range []string{"", "Bearer wrong-token-0123456789"} {
		code, st := getStatus(t, d, agent, auth)
		items, _ := st["items"].([]any)
		if code != 200 || st["queuedCount"] != 2.0 || st["agentId"] != agent.String() || len(items) != 2 {
			t.Fatalf("status without the token (%q): %d %v", auth, code, st)
		}
		for i, it := range items {
			m := it.(map[string]any)
			if len(m) != 3 || m["position"] != float64(i+1) || m["status"] != "queued" || m["createdAt"] == nil {
				t.Fatalf("public item %d shows %v, want only status, position and createdAt", i, m)
			}
		}
	}
	code, st := getStatus(t, d, agent, "Bearer "+testToken)
	first := st["items"].([]any)[0].(map[string]any)
	if code != 200 || first["orderId"] == nil || first["userId"] != "user-7" {
		t.Fatalf("status with the token: %d %v", code, st)
	}
	private := startInProcess(t, testEnv(t, db.URL, amqpURL, map[string]string{"QUEUE_AGENT_STATUS_PUBLIC": "false"}))
	if code, body := getStatus(t, private, agent, ""); code != 401 || body["code"] != "UNAUTHORIZED" {
		t.Fatalf("private status without the token: %d %v", code, body)
	}
	if code, _ := getStatus(t, private, agent, "Bearer "+testToken); code != 200 {
		t.Fatalf("private status with the token: %d", code)
	}
}
