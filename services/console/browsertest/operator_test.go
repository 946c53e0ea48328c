package browsertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// readToken is the read-only token of the operator test's console.
const readToken = "browsertest-read-token-0123456789"

// TestOperatorPagesInBrowser drives what an operator used to River UI,
// asynqmon or Flower expects, at 1280 px: search the task list, read a
// task's timeline and versions, replay dead letters in bulk after a dry-run
// count and a confirmation, pause a step on the health page (its worker
// stops consuming) and resume it, see the workers, read the audit log —
// and, logged in with the read-only token, see no button that changes
// anything. The stack is the console, extract_audio and the dead-letter
// recorder (tasks wait at asr). A screenshot of every page is kept.
func TestOperatorPagesInBrowser(t *testing.T) {
	needBrowser(t)
	s := newStackOf(t, []string{"extract_audio", "dlq_recorder", "console"}, map[string]string{"DUBFLOW_API_READ_TOKEN": readToken})
	video := sampleVideo(t)
	b := newBrowserSized(t, s.console, 1280, 900)
	b.login(s.token)
	first, second := s.submit(t, video, "operator-first.mp4"), s.submit(t, video, "Board Meeting (draft).mp4")

	// Search: an id prefix finds one task of the two.
	b.visit("/tasks", "#tasks tr[data-id]")
	b.waitFor(`document.querySelectorAll('#tasks tr[data-id]').length === 2`, 30*time.Second)
	b.run(10*time.Second, "search", chromedp.SetValue(chromedp.CSS("#search-q"), first[:8]), chromedp.Click(chromedp.CSS("#search-go")))
	b.waitFor(fmt.Sprintf(`location.search.includes('q=%s') && document.querySelectorAll('#tasks tr[data-id]').length === 1 &&
		!!document.querySelector('#tasks tr[data-id=%q]')`, first[:8], first), 30*time.Second)
	// The uploaded file's name: shown in the list, found in any case.
	b.run(10*time.Second, "search by file name", chromedp.SetValue(chromedp.CSS("#search-q"), "board MEETING"), chromedp.Click(chromedp.CSS("#search-go")))
	b.waitFor(fmt.Sprintf(`document.querySelectorAll('#tasks tr[data-id]').length === 1 &&
		document.querySelector('#tasks tr[data-id=%q] .file-name')?.textContent === 'Board Meeting (draft).mp4'`, second), 30*time.Second)
	b.shot("tasks-search")

	// Timeline: extract_audio's attempt, started and ended, with its worker.
	b.visit("/tasks/"+second+"#timeline", "#tabbtn-timeline.on")
	b.waitFor(`[...document.querySelectorAll('#timeline-table tr[data-kind]')].map(r => r.dataset.kind).join() .includes('created,attempt_started,attempt_ended')`, 2*time.Minute)
	b.waitFor(`[...document.querySelectorAll('#timeline-table tr[data-kind=attempt_started] td')].some(td => td.textContent.includes('extract_audio-'))`, 10*time.Second)
	b.waitFor(`document.querySelector('#task-file-name')?.textContent === 'Board Meeting (draft).mp4'`, 10*time.Second)
	b.shot("task-timeline")
	b.click("#tabbtn-versions")
	b.waitFor(`!document.querySelector('#tab-versions').hidden && /No output yet|v1/.test(document.querySelector('#versions').textContent)`, 30*time.Second)
	b.click("#tabbtn-overview")
	b.waitFor(`!document.querySelector('#tab-overview').hidden && document.querySelector('#tab-timeline').hidden`, 10*time.Second)
	b.shot("task")

	b.bulkReplay(t, s, video)
	b.pauseAndResume(t, s)

	b.visit("/audit", "#audit-body tr")
	b.waitFor(`['pause', 'resume', 'replay', 'login'].every(a => !!document.querySelector('#audit-body tr[data-action=' + a + ']'))`, 30*time.Second)
	b.shot("audit")

	b.readOnly(first)
	b.checkNoPageErrors()
}

// bulkReplay makes two dead letters (tasks whose video is missing), counts
// them with a dry run, stores their videos (the fix) and replays both after
// the confirmation.
func (b *browser) bulkReplay(t *testing.T, s *stack, video string) {
	t.Helper()
	lost := []uuid.UUID{s.deadLetterForMissingVideo(t), s.deadLetterForMissingVideo(t)}
	b.visit("/dead-letters", "#bulk")
	b.waitFor(`document.querySelectorAll('#dead-letters tr[data-id]').length === 2`, 2*time.Minute)
	b.run(10*time.Second, "filter and count", chromedp.SetValue(chromedp.CSS("#bulk-step"), "extract_audio"),
		chromedp.Click(chromedp.CSS("#bulk-count")))
	b.waitFor(`document.querySelector('#bulk-result').dataset.matched === '2' &&
		document.querySelector('#bulk-replay').textContent === 'Replay 2…' && !document.querySelector('#bulk-replay').disabled`, 30*time.Second)
	b.shot("dead-letters-dry-run")
	for _, id := range lost {
		s.putSource(t, id, video)
	}
	b.click("#bulk-replay")
	b.waitFor(`!document.querySelector('#bulk-confirm').hidden && document.querySelector('#bulk-yes').textContent === 'Yes, replay 2'`, 10*time.Second)
	b.shot("dead-letters-confirm")
	b.click("#bulk-yes")
	b.waitFor(`document.querySelector('#bulk-result').textContent.startsWith('Replayed 2')`, 30*time.Second)
	b.waitFor(`[...document.querySelectorAll('#dead-letters tr[data-id] button.replay')].every(x => x.textContent === 'replayed')`, 30*time.Second)
	b.shot("dead-letters")
}

// pauseAndResume pauses extract_audio from the health page: within 5 s its
// worker has no consumer (GET /api/queues, the broker's count) and the
// Workers page shows it paused; Resume brings the consumer back.
func (b *browser) pauseAndResume(t *testing.T, s *stack) {
	t.Helper()
	// The replayed steps run first: a quorum queue counts a cancelled
	// consumer until its delivery in flight is acked.
	s.waitIdle(t, "extract_audio")
	b.visit("/health", "#work-queues-body tr[data-step=extract_audio]")
	b.click("#pause-extract_audio")
	start := time.Now()
	b.waitFor(`document.querySelector('#work-queues-body tr[data-step=extract_audio]').dataset.paused === '1'`, 10*time.Second)
	s.waitConsumers(t, "extract_audio", 0, 5*time.Second)
	t.Logf("paused from the page: no consumer after %s", time.Since(start).Round(10*time.Millisecond))
	b.visit("/workers", "#workers-body tr")
	b.waitFor(`document.querySelector('#workers-body tr[data-service=extract_audio]')?.dataset.status === 'paused'`, 30*time.Second)
	b.shot("workers")
	b.visit("/health", "#work-queues-body tr[data-step=extract_audio]")
	b.waitFor(`document.querySelectorAll('#chart-depth polyline').length > 0`, time.Minute)
	b.shot("health-paused")
	b.click("#resume-extract_audio")
	b.waitFor(`document.querySelector('#work-queues-body tr[data-step=extract_audio]').dataset.paused === '0'`, 10*time.Second)
	s.waitConsumers(t, "extract_audio", 1, 5*time.Second)
	b.shot("health")
}

// readOnly logs in with the read-only token: the pages show no button that
// changes anything.
func (b *browser) readOnly(task string) {
	b.t.Helper()
	b.click("#logout")
	b.run(30*time.Second, "log in read-only", chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SetValue(chromedp.CSS("#token"), readToken), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#tasks")))
	const noChanges = `(() => {
		const changing = /^(Cancel|Retry|Redub|Replay|Replay.*|Purge.*|Pause|Resume|Requeue all|Upload a video|Count matching|Upload)$/;
		const shown = [...document.querySelectorAll('button, a')].filter(e => e.offsetParent !== null && changing.test(e.textContent.trim()));
		if (shown.length) throw new Error('read-only session sees: ' + shown.map(e => e.textContent).join(', '));
		return document.body.classList.contains('readonly') && document.querySelector('#who').textContent.includes('read-only'); })()`
	for _, page := range []struct{ path, ready string }{
		{"/tasks", "#tasks tr[data-id]"}, {"/tasks/" + task, "#task-status .badge"}, {"/dead-letters", "#dead-letters tr[data-id]"},
		{"/health", "#work-queues-body tr[data-step]"}, {"/workers", "#workers-body tr"}, {"/audit", "#audit-body tr"},
	} {
		b.visit(page.path, page.ready)
		b.waitFor(noChanges, 10*time.Second)
	}
	b.shot("read-only-audit")
}

// submit creates a task through the API with the admin token, the video
// uploaded as name, and returns its id.
func (s *stack) submit(t *testing.T, video, name string) string {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("source", "en")
	_ = mw.WriteField("target", "es")
	fw, err := mw.CreateFormFile("video", name)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(video)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(data)
	mw.Close()
	var out struct {
		TaskID string `json:"taskId"`
	}
	s.call(t, "POST", "/api/tasks", mw.FormDataContentType(), &buf, http.StatusCreated, &out)
	return out.TaskID
}

// waitIdle waits until GET /api/workers shows service's worker idle.
func (s *stack) waitIdle(t *testing.T, service string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var page struct {
			Workers []struct {
				Service string `json:"service"`
				Status  string `json:"status"`
			} `json:"workers"`
		}
		s.call(t, "GET", "/api/workers", "", nil, http.StatusOK, &page)
		for _, w := range page.Workers {
			if w.Service == service && w.Status == "idle" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no idle worker: %+v", service, page)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitConsumers waits, at most within, until GET /api/queues counts n
// consumers of step's queue.
func (s *stack) waitConsumers(t *testing.T, step string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var page struct {
			Queues []struct {
				Step      string `json:"step"`
				Consumers int    `json:"consumers"`
			} `json:"queues"`
		}
		s.call(t, "GET", "/api/queues", "", nil, http.StatusOK, &page)
		for _, q := range page.Queues {
			if q.Step == step && q.Consumers == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %d consumers within %s: %+v", step, n, within, page)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// call sends an API request with the admin token and decodes the answer.
func (s *stack) call(t *testing.T, method, path, contentType string, body io.Reader, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, s.console+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, strings.TrimSpace(string(data)))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}
