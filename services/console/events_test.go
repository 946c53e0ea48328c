package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
)

// openStream opens path as an event stream with Last-Event-ID lastID
// (none when "") and returns its reader; the stream closes with the test
// or with close.
func (f *fixture) openStream(t *testing.T, path, lastID string) (*sseReader, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", f.http.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	closeFn := func() { cancel(); resp.Body.Close() }
	t.Cleanup(closeFn)
	return &sseReader{r: bufio.NewReader(resp.Body)}, closeFn
}

// waitPolled waits until the hub has polled past every change committed so
// far: what changed is then published, to nobody, and only a replay can
// send it again.
func (f *fixture) waitPolled(t *testing.T) {
	t.Helper()
	var now time.Time
	if err := f.pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 30*time.Second, "the events hub to poll", func() bool { return f.srv.events.PolledAt() > now.UnixMicro() })
}

func TestTaskEventsResumeAfterLastEventID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.insertTask(t, "running", time.Now())
	path := "/api/tasks/" + id.String() + "/events"
	sse, closeStream := f.openStream(t, path, "")
	if name, _, err := sse.next(); err != nil || name != "task" || sse.lastID == "" {
		t.Fatalf("first event %q, id %q: %v", name, sse.lastID, err)
	}
	lastID := sse.lastID
	closeStream()

	// While the client is away: an attempt starts and the task is
	// cancelled; the hub sees both before the client comes back.
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO task_steps (task_id, step, attempt, status, worker)
		VALUES ($1, 'extract_audio', 1, 'running', 'w-missed')`, id); err != nil {
		t.Fatal(err)
	}
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/cancel", map[string]string{"reason": "while away"}, http.StatusOK, nil)
	f.waitPolled(t)

	sse, _ = f.openStream(t, path, lastID)
	var sawStep, sawCancel bool
	prev := int64(0)
	for !sawStep || !sawCancel {
		name, data, err := sse.next()
		if err != nil {
			t.Fatalf("resumed stream ended before the missed events (step %v, cancel %v): %v", sawStep, sawCancel, err)
		}
		n, err := strconv.ParseInt(sse.lastID, 10, 64)
		if err != nil || n < prev {
			t.Fatalf("event id %q after %d: want increasing numbers", sse.lastID, prev)
		}
		prev = n
		sawStep = sawStep || (name == "step" && strings.Contains(data, `"worker":"w-missed"`))
		sawCancel = sawCancel || (name == "task" && strings.Contains(data, "cancelled: while away"))
	}
}

func TestAllEventsResumeOrReset(t *testing.T) {
	t.Parallel()
	f := setup(t)
	sse, closeStream := f.openStream(t, "/api/events", "")
	// The stream's id is set at once, before any event.
	if err := sse.skipToID(); err != nil {
		t.Fatalf("no id on a fresh stream: %v", err)
	}
	lastID := sse.lastID
	closeStream()

	id := f.insertTask(t, "running", time.Now())
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/cancel", map[string]string{"reason": "gone"}, http.StatusOK, nil)
	f.waitPolled(t)
	sse, _ = f.openStream(t, "/api/events", lastID)
	for {
		name, data, err := sse.next()
		if err != nil {
			t.Fatalf("resumed stream ended before the missed task: %v", err)
		}
		if name == "task" && strings.Contains(data, id.String()) && strings.Contains(data, "cancelled: gone") {
			break
		}
	}

	// An id too old or not of this stream asks the client to reload.
	old := strconv.FormatInt(time.Now().Add(-time.Hour).UnixMicro(), 10)
	for _, bad := range []string{old, "nope"} {
		sse, _ := f.openStream(t, "/api/events", bad)
		if name, data, err := sse.next(); err != nil || name != "reset" || !strings.Contains(data, "reason") {
			t.Fatalf("Last-Event-ID %q: first event %q %s %v, want reset", bad, name, data, err)
		}
	}
}

// skipToID reads lines until an id field.
func (s *sseReader) skipToID() error {
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return err
		}
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "id: "); ok {
			s.lastID = v
			return nil
		}
	}
}
