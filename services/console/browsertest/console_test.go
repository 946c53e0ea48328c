package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestConsoleInBrowser: an operator logs in with the token, uploads a
// video, watches its task reach done on the task page, plays the dub, and
// replays a dead letter after fixing its cause (the missing source video),
// after which that task is dubbed too. Screenshots of every page go to the
// test's artifact folder (go test -artifacts keeps them; the path is
// logged).
func TestConsoleInBrowser(t *testing.T) {
	needBrowser(t)
	s := newStack(t)
	video := sampleVideo(t)
	b := newBrowser(t, s.console)

	b.login(s.token)
	id := b.upload(video, "")
	b.waitTaskStatus(id, "done", 6*time.Minute)
	b.playDub()
	b.shot("task-done")
	// The task page lists the lines of the dub, each with its translation
	// in an input and a Redub button (enabled: the task is done).
	b.waitFor(`document.querySelectorAll('#segments-table tbody tr[id^="seg-"]').length > 0 &&
		!document.querySelector('#redub-1').disabled && document.querySelector('#seg-text-1').value !== ''`, 30*time.Second)
	b.visit("/tasks", "#tasks tr[data-id]")
	b.shot("tasks")
	b.visit("/health", "#queues-body tr[data-queue]")
	b.waitFor(`document.querySelectorAll('#chart-depth polyline').length > 0`, 30*time.Second)
	b.shot("health")

	b.visit("/compensation", "#compensation tbody tr")
	b.visit("/waiting", "#waiting tbody tr")
	b.waitFor(`document.querySelectorAll('#projects tbody tr').length > 0`, 30*time.Second) // the list, or why there is none

	lost := s.deadLetterForMissingVideo(t)
	b.visit("/dead-letters", "#dead-letters")
	b.waitFor(fmt.Sprintf(`!!document.querySelector('#dead-letters tr[data-id] a[href="/tasks/%s"]')`, lost), 2*time.Minute)
	b.shot("dead-letters")
	s.putSource(t, lost, video) // the operator fixes the cause...
	b.click(fmt.Sprintf(`//tr[.//a[@href="/tasks/%s"]]//button[contains(@class, "replay")]`, lost))
	b.waitFor(fmt.Sprintf(`[...document.querySelectorAll('#dead-letters tr[data-id]')].some(r =>
		r.querySelector('a[href="/tasks/%s"]') && r.querySelector('button.replay').textContent === 'replayed')`, lost), 30*time.Second)
	b.shot("dead-letter-replayed")
	b.waitTaskStatus(lost.String(), "done", 6*time.Minute) // ...and the replay dubs the video

	b.severalLanguages(video)
	b.checkNoPageErrors()
}

// browser is one headless Chromium tab on the console, recording the
// page's JavaScript exceptions and console errors.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string
	mu    sync.Mutex
	errs  []string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	return newBrowserSized(t, base, 1440, 1100)
}

// newBrowserSized is newBrowser with a window of width × height.
func newBrowserSized(t *testing.T, base string, width, height int) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"), chromedp.WindowSize(width, height))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shots: t.ArtifactDir()}
	t.Logf("screenshots: %s", b.shots)
	if err := chromedp.Listen(ctx, b.record); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the log domain: %v", err)
	}
	return b
}

// record keeps the page's uncaught exceptions, console.error calls and
// browser errors other than failed requests (the API's 401 before login is
// expected; a Content-Security-Policy violation is not).
func (b *browser) record(ev any) {
	var msg string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = "exception: " + e.ExceptionDetails.Text
		if ex := e.ExceptionDetails.Exception; ex != nil {
			msg += " " + ex.Description
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		msg = "console.error:"
		for _, a := range e.Args {
			msg += " " + string(a.Value) + a.Description
		}
	case *log.EventEntryAdded:
		if e.Entry.Level != log.EntryLevelError || e.Entry.Source == log.EntrySourceNetwork {
			return
		}
		msg = fmt.Sprintf("%s: %s (%s)", e.Entry.Source, e.Entry.Text, e.Entry.URL)
	default:
		return
	}
	b.mu.Lock()
	b.errs = append(b.errs, msg)
	b.mu.Unlock()
}

func (b *browser) checkNoPageErrors() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("the page reported an error: %s", e)
	}
}

// run runs actions with a bound on their wait.
func (b *browser) run(within time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed")
		b.t.Fatalf("%s: %v (page: %s)", what, err, b.location())
	}
}

func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	return loc
}

func (b *browser) visit(path, ready string) {
	b.t.Helper()
	b.run(time.Minute, "open "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS(ready)))
}

// click clicks the first element of an XPath or CSS search.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.run(30*time.Second, "click "+sel, chromedp.Click(chromedp.Search(sel)))
}

// waitFor waits until the JavaScript expression is true on the page.
func (b *browser) waitFor(expr string, within time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(within))); err != nil {
		b.shot("failed")
		b.t.Fatalf("wait for %s: %v (page: %s)", expr, err, b.location())
	}
}

// shot saves a screenshot of the whole page as NAME.png (quality 100:
// PNG, not JPEG).
func (b *browser) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

// login opens a page, is sent to /login, and logs in with the token.
func (b *browser) login(token string) {
	b.t.Helper()
	b.run(30*time.Second, "open /tasks without a session", chromedp.Navigate(b.base+"/tasks"), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	if loc := b.location(); !strings.Contains(loc, "/login") {
		b.t.Errorf("without a session the page stays at %s, want /login", loc)
	}
	b.run(10*time.Second, "wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"), chromedp.Click(chromedp.CSS("#login")))
	b.waitFor(`document.querySelector('#login-error').textContent.includes('not valid')`, 10*time.Second)
	b.shot("login")
	b.run(30*time.Second, "log in", chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#tasks")))
	cookies, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		b.t.Fatal(err)
	}
	if strings.Contains(cookies, "dubflow_session") {
		b.t.Errorf("the session cookie is readable by scripts (cookies %q): it must be HttpOnly", cookies)
	}
}

// upload submits the video through the upload form and returns the task
// id of the page it lands on.
func (b *browser) upload(video, targets string) string {
	b.t.Helper()
	b.visit("/upload", "#upload-form")
	b.run(30*time.Second, "choose the video", chromedp.SetUploadFiles(chromedp.CSS("#video"), []string{video}))
	if targets != "" {
		b.run(10*time.Second, "name the languages", chromedp.SetValue(chromedp.CSS("#target"), targets))
	}
	b.waitFor(`/KiB|MiB/.test(document.querySelector('#upload-status').textContent)`, 10*time.Second)
	b.shot("upload")
	b.run(10*time.Second, "submit", chromedp.Click(chromedp.CSS("#upload")))
	b.waitFor(`/^\/tasks\/[0-9a-f-]{36}$/.test(location.pathname)`, 2*time.Minute)
	loc := b.location()
	id := regexp.MustCompile(`[0-9a-f-]{36}$`).FindString(loc)
	b.t.Logf("task %s", id)
	return id
}

// waitTaskStatus opens the task page and waits until its live status
// shows want. After an upload the page is already open: it updates
// itself (Server-Sent Events) and is never reloaded.
func (b *browser) waitTaskStatus(id, want string, within time.Duration) {
	b.t.Helper()
	if !strings.HasSuffix(b.location(), "/tasks/"+id) {
		b.visit("/tasks/"+id, "#task-status .badge")
	}
	b.waitFor(`!!document.querySelector('#task-status .badge')`, time.Minute)
	b.shot("task-" + id[:8] + "-open")
	b.waitFor(fmt.Sprintf(`(() => { const s = document.querySelector('#task-status').textContent;
		if (s === 'failed') throw new Error('task failed: ' + document.querySelector('#task-error').textContent);
		return s === %q; })()`, want), within)
}

// playDub plays the dubbed video in the page's player: it must load its
// metadata (a duration), reach readyState >= 2 and advance its time.
func (b *browser) playDub() {
	b.t.Helper()
	b.waitFor(`!!document.querySelector('#dub-video')`, 30*time.Second)
	const play = `(async () => {
		const v = document.querySelector('#dub-video');
		v.muted = true;
		await v.play();
		return true; })()`
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](play, chromedp.EvalAwaitPromise)); err != nil {
		b.t.Fatalf("play the dub: %v", err)
	}
	b.waitFor(`(() => { const v = document.querySelector('#dub-video');
		if (v.error) throw new Error('media error ' + v.error.code + ': ' + v.error.message);
		return v.readyState >= 2 && v.duration > 0 && v.currentTime > 0.3; })()`, time.Minute)
	state, err := chromedp.Run(b.ctx, chromedp.Evaluate[map[string]float64](`(() => { const v = document.querySelector('#dub-video');
		v.pause(); return {readyState: v.readyState, duration: v.duration, currentTime: v.currentTime}; })()`))
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("dub player: %v", state)
}

// sampleVideo makes a short English clip with speech (pkg/media's sample
// helper: espeak-ng over a test picture).
func sampleVideo(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sample.mp4")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := media.MakeSampleVideo(ctx, "Hello and welcome. This short video tests the dubbing console.", out, media.SampleOptions{}); err != nil {
		t.Fatalf("make the sample video: %v", err)
	}
	return out
}

// deadLetterForMissingVideo publishes a task whose source video is not in
// storage, as another system would; extract_audio dead-letters it and the
// recorder records the dead letter. It returns the task id.
func (s *stack) deadLetterForMissingVideo(t *testing.T) uuid.UUID {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	payload, err := json.Marshal(wire.ExtractAudio{SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio,
		SourceLanguage: "en", TargetLanguage: "es"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(wire.Envelope{TaskID: id, Step: wire.StepExtractAudio, Attempt: 1,
		TraceID: "browsertest-" + id.String()[:8], CreatedAt: time.Now().UTC(), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	ch := brokertest.Channel(t, s.env["AMQP_URL"])
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, wire.Exchange, wire.RoutingKey(wire.StepExtractAudio), true, false,
		amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: uuid.NewString(), Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := conf.WaitContext(ctx); err != nil || !ok {
		t.Fatalf("publish the task: confirmed %v, %v", ok, err)
	}
	return id
}

// putSource stores the video at the task's source key.
func (s *stack) putSource(t *testing.T, id uuid.UUID, video string) {
	t.Helper()
	store, err := blob.New(config.S3{Endpoint: s.bucket.Endpoint, AccessKey: s.bucket.AccessKey,
		SecretKey: s.bucket.SecretKey, Bucket: s.bucket.Name, UseSSL: s.bucket.UseSSL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.PutFile(ctx, wire.DefaultKeys(id).SourceVideo, video, "video/mp4"); err != nil {
		t.Fatal(err)
	}
}

// severalLanguages uploads the video into two languages at once: the
// parent's page lists one child task per language, each reaching done with
// a link to its dub and no Redub on the parent's page, and a child's page
// links back to its parent and offers Redub.
func (b *browser) severalLanguages(video string) {
	b.t.Helper()
	parent := b.upload(video, "es, ca")
	b.waitFor(`document.querySelectorAll('#children-table tbody tr[data-lang]').length === 2`, time.Minute)
	b.waitTaskStatus(parent, "done", 8*time.Minute)
	for _, lang := range []string{"es", "ca"} {
		b.waitFor(fmt.Sprintf(`(() => { const r = document.querySelector('#children-table tr[data-lang=%q]');
			return !!r && r.dataset.status === 'done' && r.querySelector('.badge').textContent === 'done' &&
				!!r.querySelector('a.child-dub[href]') && /^\/tasks\/[0-9a-f-]{36}$/.test(r.querySelector('td.mono a').getAttribute('href')); })()`, lang),
			30*time.Second)
	}
	b.shot("task-languages")
	// A parent's page offers only what applies: its lines are listed as
	// transcribed, without an input or a Redub button (each language is
	// re-dubbed in its own child task).
	b.waitFor(`document.querySelectorAll('#segments-table tbody tr[id^="seg-"]').length > 0 &&
		document.querySelectorAll('[id^="redub-"], [id^="seg-text-"]').length === 0 &&
		document.querySelector('#segments-hint').textContent.includes('open the task of its language')`, 30*time.Second)
	b.click(`//table[@id="children-table"]//tr[@data-lang="ca"]//td[contains(@class, "mono")]/a`)
	b.waitFor(fmt.Sprintf(`!!document.querySelector('#parent-task a[href="/tasks/%s"]') &&
		document.querySelector('#task-status').textContent === 'done'`, parent), time.Minute)
	// A child is re-dubbed like any task: its page offers Redub.
	b.waitFor(`!!document.querySelector('#redub-1') && !document.querySelector('#redub-1').disabled`, 30*time.Second)
	b.shot("task-language-child")
}
