package main

// The harness of the cross-service tests: the five workers, this recorder,
// tts_requeue, the reconciler and dubctl built into a temporary folder and
// run as processes on a fresh database, virtual host and bucket, with
// remote speech engines served by a local fake (engines) so that tests
// choose which calls fail.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// workers are the dubbing chain's services, in pipeline order.
var workers = []string{"extract_audio", "asr", "translate", "tts", "mux_video"}

// builtServices builds every service the cross-service tests run, once.
var builtServices = sync.OnceValues(func() (string, error) {
	return testenv.SharedBinaries(append(append([]string{}, workers...), "dlq_recorder", "tts_requeue", "reconciler", "dubctl")...)
})

// binaries returns the folder of the built services.
func binaries(tb testing.TB) string {
	tb.Helper()
	dir, err := builtServices()
	if err != nil {
		tb.Fatalf("build the services: %v", err)
	}
	return dir
}

// flow is one test's stack and processes.
type flow struct {
	t       testing.TB
	bin     string
	env     map[string]string
	db      *testenv.Database
	blob    *blob.Store
	pub     *broker.Publisher
	conn    *broker.Conn
	engines *engines
	procs   map[string]*testenv.Proc
	video   string // a local sample video
}

// sampleText is spoken in the sample video (about 8 s); the fake ASR
// answers with fakeSegments whatever the audio says.
const sampleText = "Good morning everyone. Today we are going to talk about the weather. " +
	"It will be sunny in the afternoon, and tomorrow it will rain."

var fakeSegments = []fakeSegment{
	{0.5, 2.0, "Good morning everyone."},
	{2.0, 3.5, "Today we talk about the weather."},
	{3.5, 5.0, "It will be sunny in the afternoon."},
	{5.0, 6.5, "Tomorrow it will rain."},
}

// translated is what the fake translation engine makes of a line.
func translated(s string) string { return "es: " + s }

func newFlow(t testing.TB, extra map[string]string) *flow {
	t.Helper()
	bin := binaries(t)
	b := testenv.NewBackends(t)
	e := newEngines()
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	env := b.Env(map[string]string{
		"LOG_LEVEL": "info", "SHUTDOWN_GRACE_SECONDS": "10",
		"ASR_ENGINE": "openai", "ASR_BASE_URL": srv.URL, "ASR_MODEL": "whisper-1",
		"TRANSLATE_ENGINE": "apy", "TRANSLATE_BASE_URL": srv.URL,
		"TTS_ENGINE": "tts_service", "TTS_BASE_URL": srv.URL,
		"TTS_MAX_RETRIES": "1", "TTS_RETRY_DELAY_SECONDS": "0.1",
	})
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	conn, pub := brokertest.Dial(t, b.AMQPURL, "failures-test")
	f := &flow{t: t, bin: bin, env: env, db: b.DB, blob: b.Bucket.Store(t), pub: pub, conn: conn,
		engines: e, procs: map[string]*testenv.Proc{}}
	f.video = sampleVideo(t)
	return f
}

// videoDir is the folder of the sample video, made once per test binary
// by sampleVideo and removed by TestMain; the tests only read it.
var videoDir string

var makeVideo = sync.OnceValue(func() error {
	var err error
	if videoDir, err = os.MkdirTemp("", "dubflow-failures-video-*"); err != nil {
		return err
	}
	return media.MakeSampleVideo(context.Background(), sampleText, filepath.Join(videoDir, "sample.mp4"), media.SampleOptions{})
})

// sampleVideo returns the path of the shared sample video.
func sampleVideo(tb testing.TB) string {
	tb.Helper()
	if err := makeVideo(); err != nil {
		tb.Fatalf("make sample video: %v", err)
	}
	return filepath.Join(videoDir, "sample.mp4")
}

// TestMain removes the sample video the tests made.
// TestMain keeps go test's -parallel (each test runs a whole stack of
// processes) and removes what ended tests leave behind in the background.
func TestMain(m *testing.M) {
	code := testenv.Main(m, 0)
	if videoDir != "" {
		_ = os.RemoveAll(videoDir)
	}
	os.Exit(code)
}

// start runs the named services and waits until each is ready.
func (f *flow) start(names ...string) {
	f.t.Helper()
	for _, name := range names {
		p := testenv.StartProc(f.t, f.bin, name, f.env)
		f.procs[name] = p
		f.t.Cleanup(func() { p.Stop(f.t, false) })
	}
	for _, name := range names {
		f.procs[name].WaitReady(f.t)
	}
}

// stopOne stops a running service before the end of the test.
func (f *flow) stopOne(name string) {
	f.t.Helper()
	f.procs[name].Stop(f.t, false)
}

// command runs a tool binary with the stack's environment.
func (f *flow) command(name string, args ...string) (string, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(f.bin, name), args...)
	for k, v := range f.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %v: %w\n%s", name, args, err, stderr.String())
	}
	return stdout.String(), nil
}

// submit uploads the sample video (unless upload is false) and publishes
// the example extract_audio message (proto/examples); extract_audio creates the task row.
func (f *flow) submit(upload bool) uuid.UUID {
	f.t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	if upload {
		f.upload(id)
	}
	env, err := wire.New(wire.StepExtractAudio, id, "", wire.ExtractAudio{SourceVideoKey: keys.SourceVideo,
		OutputAudioKey: keys.SourceAudio, SourceLanguage: "en", TargetLanguage: "es"})
	if err != nil {
		f.t.Fatal(err)
	}
	body, _ := env.Marshal()
	if err := f.pub.Publish(context.Background(), wire.Exchange, wire.QueueExtractAudio,
		amqpJSON(body)); err != nil {
		f.t.Fatalf("publish: %v", err)
	}
	return id
}

func (f *flow) upload(id uuid.UUID) {
	f.t.Helper()
	if err := f.blob.PutFile(context.Background(), wire.DefaultKeys(id).SourceVideo, f.video, "video/mp4"); err != nil {
		f.t.Fatalf("upload: %v", err)
	}
}

// status returns a task's status and error ("" when it has no row yet).
func (f *flow) status(id uuid.UUID) (string, string) {
	f.t.Helper()
	var s, e string
	err := f.db.Pool.QueryRow(context.Background(), `SELECT status, error FROM tasks WHERE id = $1`, id).Scan(&s, &e)
	if err != nil && !strings.Contains(err.Error(), "no rows") {
		f.t.Fatalf("read task: %v", err)
	}
	return s, e
}

// waitStatus waits until the task has one of the statuses.
func (f *flow) waitStatus(id uuid.UUID, within time.Duration, want ...string) string {
	f.t.Helper()
	var s, e string
	if !testenv.Poll(time.Now().Add(testenv.Within(f.t, within)), func() bool {
		s, e = f.status(id)
		return slices.Contains(want, s)
	}) {
		f.t.Fatalf("task %s is %q (%s) after %s, want %v", id, s, e, testenv.Within(f.t, within), want)
	}
	return s
}

// waitSucceeded waits until a step of the task has succeeded.
func (f *flow) waitSucceeded(id uuid.UUID, stepName string) {
	f.t.Helper()
	testenv.EventuallyWithin(f.t, 2*time.Minute, fmt.Sprintf("%s of task %s to succeed", stepName, id), func() bool {
		var ok bool
		if err := f.db.Pool.QueryRow(context.Background(), `SELECT step_succeeded($1, $2)`, id, stepName).Scan(&ok); err != nil {
			f.t.Fatal(err)
		}
		return ok
	})
}

// fakeSegment is one segment the fake ASR answers with.
type fakeSegment struct {
	Start, End float64
	Text       string
}

// engines is a fake of the remote speech services, speaking their real
// protocols: OpenAI-compatible transcription, Apertium APy translation and
// tts_service (POST /synthesize). Tests break and heal them and count their calls.
type engines struct {
	mu sync.Mutex
	// asrBroken and translateBroken answer 400 (a permanent error).
	asrBroken, translateBroken bool
	// translateTimeout is the share of translation calls that hang until
	// the caller gives up.
	translateTimeout float64
	// ttsFail lists texts whose synthesis answers 503; ttsFailRate fails
	// that share of all synthesis calls at random.
	ttsFail     map[string]bool
	ttsFailRate float64
	// ttsCalls counts synthesis calls per text, ttsDone the successful ones.
	ttsCalls, ttsDone map[string]int
	timeouts          int
	rnd               *rand.Rand
}

func newEngines() *engines {
	return &engines{ttsFail: map[string]bool{}, ttsCalls: map[string]int{}, ttsDone: map[string]int{},
		rnd: rand.New(rand.NewPCG(1, 2))}
}

func (e *engines) set(fn func(e *engines)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fn(e)
}

// counts returns copies of the synthesis counters.
func (e *engines) counts() (calls, done map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	calls, done = map[string]int{}, map[string]int{}
	for k, v := range e.ttsCalls {
		calls[k] = v
	}
	for k, v := range e.ttsDone {
		done[k] = v
	}
	return calls, done
}

func (e *engines) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/audio/transcriptions":
		_, _ = io.Copy(io.Discard, r.Body)
		e.mu.Lock()
		broken := e.asrBroken
		e.mu.Unlock()
		if broken {
			http.Error(w, `{"error":{"message":"audio file could not be decoded"}}`, http.StatusBadRequest)
			return
		}
		var texts []string
		for _, s := range fakeSegments {
			texts = append(texts, s.Text)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"text": strings.Join(texts, " "), "segments": fakeSegments})
	case r.Method == http.MethodGet && r.URL.Path == "/translate":
		e.mu.Lock()
		broken := e.translateBroken
		hang := e.rnd.Float64() < e.translateTimeout
		if hang {
			e.timeouts++
		}
		e.mu.Unlock()
		if broken {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":"error","code":400,"message":"Bad Request","explanation":"broken on purpose"}`))
			return
		}
		if hang {
			<-r.Context().Done()
			return
		}
		var out []string
		for _, line := range strings.Split(r.URL.Query().Get("q"), "\n") {
			if strings.TrimSpace(line) == "" {
				out = append(out, line)
				continue
			}
			out = append(out, translated(line))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"responseData": map[string]any{"translatedText": strings.Join(out, "\n")},
			"responseDetails": nil, "responseStatus": 200})
	case r.Method == http.MethodPost && r.URL.Path == "/synthesize":
		var req struct {
			Text string `json:"text"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.ttsCalls[req.Text]++
		fail := e.ttsFail[req.Text] || e.rnd.Float64() < e.ttsFailRate
		if !fail {
			e.ttsDone[req.Text]++
		}
		e.mu.Unlock()
		if fail {
			http.Error(w, "engine overloaded", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "audio/wav")
		_, _ = w.Write(toneWAV(700 * time.Millisecond))
	default:
		http.NotFound(w, r)
	}
}

// toneWAV returns a 22.05 kHz mono 16-bit WAV of a quiet 220 Hz tone.
func toneWAV(d time.Duration) []byte {
	const rate = 22050
	n := int(d.Seconds() * rate)
	var b bytes.Buffer
	le := binary.LittleEndian
	b.WriteString("RIFF")
	_ = binary.Write(&b, le, uint32(36+2*n))
	b.WriteString("WAVEfmt ")
	_ = binary.Write(&b, le, uint32(16))
	_ = binary.Write(&b, le, uint16(1))
	_ = binary.Write(&b, le, uint16(1))
	_ = binary.Write(&b, le, uint32(rate))
	_ = binary.Write(&b, le, uint32(rate*2))
	_ = binary.Write(&b, le, uint16(2))
	_ = binary.Write(&b, le, uint16(16))
	b.WriteString("data")
	_ = binary.Write(&b, le, uint32(2*n))
	for i := 0; i < n; i++ {
		_ = binary.Write(&b, le, int16(3000*math.Sin(2*math.Pi*220*float64(i)/rate)))
	}
	return b.Bytes()
}

// eventLog collects the integrator events published during a test.
type eventLog struct {
	mu   sync.Mutex
	keys map[string]int
}

func (l *eventLog) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keys[key]
}

// bindEvents binds a queue to every event.* routing key, as an integrator
// would, and counts what arrives.
func (f *flow) bindEvents() *eventLog {
	f.t.Helper()
	ch, err := f.conn.Channel(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "event.#", wire.Exchange, false, nil); err != nil {
		f.t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	l := &eventLog{keys: map[string]int{}}
	go func() {
		for d := range deliveries {
			l.mu.Lock()
			l.keys[d.RoutingKey]++
			l.mu.Unlock()
		}
	}()
	return l
}
