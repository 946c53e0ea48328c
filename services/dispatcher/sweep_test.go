package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/dispatcher/internal/api"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The sweep: every route of openapi.json, run with bad input of every kind,
// must answer only the statuses and codes the document gives it, never a
// 5xx, never an internal name or path, and leave nothing behind. It reads
// the routes from the document, so a new route is swept by construction.

// apiDoc is openapi.json as the sweep reads it.
type apiDoc struct {
	Paths      map[string]map[string]apiOp `json:"paths"`
	Components struct {
		Schemas   map[string]json.RawMessage `json:"schemas"`
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

type apiOp struct {
	Security   *[]any `json:"security"`
	Parameters []struct {
		Name     string `json:"name"`
		In       string `json:"in"`
		Required bool   `json:"required"`
		Schema   struct {
			Maximum *int   `json:"maximum"`
			Format  string `json:"format"`
		} `json:"schema"`
	} `json:"parameters"`
	RequestBody *struct {
		Content map[string]struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]json.RawMessage `json:"responses"`
}

func loadAPIDoc(t *testing.T) apiDoc {
	t.Helper()
	var doc apiDoc
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

// resolve follows a $ref inside the document.
func (doc apiDoc) resolve(raw json.RawMessage) json.RawMessage {
	var r struct {
		Ref string `json:"$ref"`
	}
	_ = json.Unmarshal(raw, &r)
	if name, ok := strings.CutPrefix(r.Ref, "#/components/responses/"); ok {
		return doc.resolve(doc.Components.Responses[name])
	}
	if name, ok := strings.CutPrefix(r.Ref, "#/components/schemas/"); ok {
		return doc.resolve(doc.Components.Schemas[name])
	}
	return raw
}

// codes lists the error codes a documented response allows.
func (doc apiDoc) codes(response json.RawMessage) []string {
	var resp struct {
		Content map[string]struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"content"`
	}
	_ = json.Unmarshal(doc.resolve(response), &resp)
	var walk func(raw json.RawMessage) []string
	walk = func(raw json.RawMessage) []string {
		var s struct {
			AllOf      []json.RawMessage `json:"allOf"`
			Properties struct {
				Code struct {
					Enum []string `json:"enum"`
				} `json:"code"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(raw, &s)
		out := s.Properties.Code.Enum
		// allOf: the Error schema (by $ref, not followed: it lists every
		// code) and the response's own enum.
		for _, sub := range s.AllOf {
			if codes := walk(sub); len(codes) > 0 {
				out = codes
			}
		}
		return out
	}
	return walk(resp.Content["application/json"].Schema)
}

// example builds a value that satisfies a schema's required properties
// (uuids fresh, enums and consts their first value, numbers their
// minimum): a valid body, for the cases that must be refused for another
// reason than the body.
func (doc apiDoc) example(raw json.RawMessage) any {
	var s struct {
		Type       any                        `json:"type"`
		Format     string                     `json:"format"`
		Const      any                        `json:"const"`
		Enum       []any                      `json:"enum"`
		Minimum    *float64                   `json:"minimum"`
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(doc.resolve(raw), &s)
	switch {
	case s.Const != nil:
		return s.Const
	case len(s.Enum) > 0:
		return s.Enum[0]
	case s.Format == "uuid":
		return uuid.NewString()
	case s.Type == "integer" || s.Type == "number":
		if s.Minimum != nil {
			return *s.Minimum
		}
		return 1
	case s.Type == "string":
		return "x"
	}
	obj := map[string]any{}
	for _, name := range s.Required {
		obj[name] = doc.example(s.Properties[name])
	}
	return obj
}

// sweepCase is one request of the sweep.
type sweepCase struct {
	kind, method, path, contentType string
	body                            []byte
	noToken                         bool
	header                          map[string]string
	// want is the statuses allowed beyond the operation's documented
	// ones (a route-independent answer: 405, 404 for an unknown path);
	// only, when set, is the one status the case must get.
	only int
}

// badIDs are the malformed ids every path parameter is swept with: none
// is a canonical non-nil UUID.
func badIDs() []string {
	id := uuid.NewString()
	return []string{"..", "%2e%2e", "%2E%2E%2Fopenapi.json", "..%2f..%2fstaff", ".", "not-a-uuid",
		"%7B" + id + "%7D", "urn:uuid:" + id, strings.ReplaceAll(id, "-", ""), uuid.Nil.String(),
		"%00", id + "%00", "%20" + id, strings.Repeat("a", 5000), "%E5%AD%97"}
}

// fill replaces every {param} of path with a fresh UUID, but target with
// value.
func fill(path, target, value string) string {
	return regexp.MustCompile(`\{[^}]+\}`).ReplaceAllStringFunc(path, func(p string) string {
		if p == "{"+target+"}" {
			return value
		}
		return uuid.NewString()
	})
}

// sweepCases lists the bad requests of one operation.
func (doc apiDoc) sweepCases(path, method string, op apiOp) []sweepCase {
	var body []byte
	if op.RequestBody != nil {
		body, _ = json.Marshal(doc.example(op.RequestBody.Content["application/json"].Schema))
	}
	base := sweepCase{method: method, path: fill(path, "", ""), contentType: "application/json", body: body, header: map[string]string{}}
	for _, p := range op.Parameters {
		if p.In == "header" && p.Required {
			base.header[p.Name] = uuid.NewString()
		}
	}
	with := func(kind string, f func(c *sweepCase)) sweepCase {
		c := base
		c.kind, c.header = kind, map[string]string{}
		for k, v := range base.header {
			c.header[k] = v
		}
		f(&c)
		return c
	}
	cases := []sweepCase{
		with("no token", func(c *sweepCase) { c.noToken = true }),
		with("malformed JSON", func(c *sweepCase) { c.body = []byte(`{"a": [1, `) }),
		with("JSON of the wrong shape", func(c *sweepCase) { c.body = []byte(`[{"project_id": 7}]`) }),
		with("not UTF-8", func(c *sweepCase) { c.body = []byte("{\"event_type\": \"\xff\xfe\"}") }),
		with("oversized body", func(c *sweepCase) { c.body = bytes.Repeat([]byte(" "), 1<<20+1) }),
		with("wrong content type", func(c *sweepCase) { c.contentType = "text/plain" }),
		with("multipart content type", func(c *sweepCase) { c.contentType = "multipart/form-data; boundary=x" }),
		with("unknown query parameter", func(c *sweepCase) { c.path += "?bogus=1" }),
		with("unknown path below", func(c *sweepCase) { c.path += "/bogus/more"; c.only = http.StatusNotFound }),
	}
	for _, p := range op.Parameters {
		switch p.In {
		case "query":
			for _, v := range []string{"bogus", "-1", "1.5", "%zz", strconv.Itoa(*p.Schema.Maximum + 1), "99999999999999999999999", "1&" + p.Name + "=2"} {
				cases = append(cases, with("query "+p.Name+"="+v, func(c *sweepCase) { c.path += "?" + p.Name + "=" + v }))
			}
		case "path":
			for _, v := range badIDs() {
				cases = append(cases, with("path "+p.Name+"="+v, func(c *sweepCase) { c.path = fill(path, p.Name, v); c.only = 400 }))
			}
		case "header":
			bad := []string{"", "   ", strings.Repeat("u", 300), strings.Repeat("字", 256)}
			if p.Schema.Format == "uuid" {
				bad = append(bad, "not-a-uuid", uuid.Nil.String(), "{"+uuid.NewString()+"}", "urn:uuid:"+uuid.NewString())
			}
			for _, v := range bad {
				cases = append(cases, with("header "+p.Name+"="+strconv.Quote(v), func(c *sweepCase) { c.header[p.Name] = v; c.only = 400 }))
			}
		}
	}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if _, ok := doc.Paths[path][strings.ToLower(m)]; !ok {
			cases = append(cases, with("method "+m, func(c *sweepCase) { c.method = m; c.only = http.StatusMethodNotAllowed }))
		}
	}
	return cases
}

// internalName matches what an answer must never show: Go types and
// packages, source files, the machine's paths, the database's words.
var internalName = regexp.MustCompile(`(?i:go struct|json: |\bstruct\b|\.go\b|/tmp/|/home/|/work/|/usr/|github\.com|` +
	`\bpgx|pgconn|sqlstate|\bpanic|goroutine|runtime\.)|internal/(api|queue|agentqueue)|` +
	`\b(main|api|queue|agentqueue|uuid)\.[A-Z]|aiEventRequest|staffRequest|agentEnqueueRequest|invalid UUID (length|format)`)

// TestSweepEveryDocumentedRoute runs every operation of openapi.json with
// the sweep's bad input (sweepCases) against a real dispatcher holding
// some state, and checks each answer and that nothing changed: the rows of
// every table the dispatcher writes, and the messages on task_exchange.
func TestSweepEveryDocumentedRoute(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	amqpURL := testenv.AMQP(t)
	d := startInProcess(t, testEnv(t, db.URL, amqpURL, nil))
	seedState(t, d, db.Pool)
	published := brokertest.Listen(t, amqpURL, "#")
	before := snapshot(t, db.Pool)
	doc := loadAPIDoc(t)
	n := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for _, c := range doc.sweepCases(path, strings.ToUpper(method), op) {
				n++
				d.sweepOne(t, doc, path, op, c)
			}
		}
	}
	after := snapshot(t, db.Pool)
	for table, sum := range before {
		if after[table] != sum {
			t.Errorf("table %s changed during the sweep", table)
		}
	}
	select {
	case m := <-published:
		t.Errorf("the sweep published %s: %s", m.RoutingKey, m.Body)
	default:
	}
	t.Logf("%d requests on %d paths", n, len(doc.Paths))
	// The bodies the sweep sent with a wrong content type were valid: with
	// JSON (and the required headers) they are taken (so the 415 case
	// could have left rows behind).
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if op.RequestBody == nil {
				continue
			}
			body := doc.example(op.RequestBody.Content["application/json"].Schema)
			headers := map[string]string{}
			for _, p := range op.Parameters {
				if p.In == "header" && p.Required {
					headers[p.Name] = uuid.NewString()
				}
			}
			if code := d.send(t, strings.ToUpper(method), fill(path, "", ""), headers, body, nil); code/100 != 2 {
				t.Errorf("%s %s with the sweep's body as JSON: %d, want it taken", method, path, code)
			}
		}
	}
}

// sweepOne sends one case and checks its answer.
func (d dispatcher) sweepOne(t *testing.T, doc apiDoc, path string, op apiOp, c sweepCase) {
	t.Helper()
	name := fmt.Sprintf("%s %s [%s]", c.method, path, c.kind)
	req, err := http.NewRequest(c.method, d.base+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	req.Header.Set("Content-Type", c.contentType)
	if !c.noToken {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	for k, v := range c.header {
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	status := strconv.Itoa(resp.StatusCode)
	documented, ok := op.Responses[status]
	switch resp.StatusCode {
	case http.StatusMethodNotAllowed:
		documented, ok = doc.Components.Responses["MethodNotAllowed"], c.only == http.StatusMethodNotAllowed
		if allow := resp.Header.Get("Allow"); ok && !sameMethods(allow, doc.Paths[path]) {
			t.Errorf("%s: Allow %q, want the path's methods", name, allow)
		}
	case http.StatusNotFound:
		if c.only == http.StatusNotFound {
			documented, ok = doc.Components.Responses["NotFound"], true
		}
	}
	switch {
	case resp.StatusCode >= 500:
		t.Errorf("%s: %d %s", name, resp.StatusCode, body)
	case c.only != 0 && resp.StatusCode != c.only:
		t.Errorf("%s: %d %s, want %d", name, resp.StatusCode, body, c.only)
	case !ok:
		t.Errorf("%s: %d is not documented for the route: %s", name, resp.StatusCode, body)
	case internalName.Match(body):
		t.Errorf("%s: the answer shows an internal name: %s", name, body)
	case resp.Header.Get("X-Content-Type-Options") != "nosniff":
		t.Errorf("%s: no X-Content-Type-Options: nosniff", name)
	}
	if resp.StatusCode < 400 {
		return
	}
	var e api.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil || e.Message == "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: error answer %q (%s), want {code, message}", name, body, resp.Header.Get("Content-Type"))
		return
	}
	if codes := doc.codes(documented); !slices.Contains(codes, e.Code) {
		t.Errorf("%s: %d %s, code not among %v", name, resp.StatusCode, e.Code, codes)
	}
}

// noRedirects is a client that shows a redirect instead of following it
// (none is documented).
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// sameMethods reports whether an Allow header lists exactly the path's
// operations.
func sameMethods(allow string, ops map[string]apiOp) bool {
	var got, want []string
	for _, m := range strings.Split(allow, ",") {
		got = append(got, strings.ToLower(strings.TrimSpace(m)))
	}
	for m := range ops {
		want = append(want, m)
	}
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}

// seedState gives the dispatcher something to lose: an agent at capacity
// with its conversation, a waiting visitor, and an agent's queued order.
func seedState(t *testing.T, d dispatcher, pool *pgxpool.Pool) {
	t.Helper()
	project, staff := uuid.New(), uuid.New()
	if code := d.call(t, "PUT", "/staff/"+staff.String(), map[string]any{"project_id": project, "availability": "online", "max_concurrent": 1}, nil); code != 200 {
		t.Fatalf("seed agent: %d", code)
	}
	for i := range 2 {
		if code := d.call(t, "POST", "/internal/ai/events", aiEvent(project, uuid.New(), "normal"), nil); code != 200 {
			t.Fatalf("seed entry %d: %d", i, code)
		}
	}
	if code := d.send(t, "POST", "/queue/agents/"+uuid.NewString()+"/orders", owner, map[string]any{"orderId": uuid.New(), "taskId": uuid.New()}, nil); code != 201 {
		t.Fatalf("seed order: %d", code)
	}
	// Let the events of the seed go out before the sweep listens.
	testenv.EventuallyWithin(t, 20*time.Second, "the seed's events to be sent", func() bool {
		var n int
		return pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n) == nil && n == 0
	})
}

// owner is the x-user-id header of the tests' outside orders.
var owner = map[string]string{"x-user-id": "user-7"}

// snapshot is a digest of every row of the tables the dispatcher writes.
func snapshot(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range []string{"visitor_waiting_queue", "staff", "agent_queues", "agent_queue_items", "task_steps", "outbox", "tasks"} {
		var sum string
		if err := pool.QueryRow(context.Background(), `SELECT count(*)::text || ':' || coalesce(md5(string_agg(x::text, '|' ORDER BY x::text)), '')
			FROM `+table+` x`).Scan(&sum); err != nil {
			t.Fatalf("digest %s: %v", table, err)
		}
		out[table] = sum
	}
	return out
}
