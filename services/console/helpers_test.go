package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/console/internal/events"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"
)

const (
	adminToken = "admin-token-0123456789abcdef"
	readToken  = "read-token-0123456789abcdef"
)

// fixture is a console on a fresh database, virtual host and bucket,
// served by httptest.
type fixture struct {
	srv   *server
	http  *httptest.Server
	pool  *pgxpool.Pool
	dbURL string
	ch    *amqp.Channel
	// amqpURL is the test's virtual host.
	amqpURL string
}

// TestMain runs up to 4 tests at once: each has its own database, bucket
// and virtual host (setup), and most of their time is spent waiting for
// the broker, Postgres and the processes some of them start.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 4))
}

func setup(t *testing.T, edit ...func(*Config)) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := testenv.Postgres(t)
	bucket := testenv.S3(t)
	cfg := &Config{APIToken: adminToken, ReadToken: readToken, SessionHours: 1, PresignSeconds: 600,
		LoginPerMinute: 6000, LoginBurst: 1000}
	cfg.DefaultSourceLanguage, cfg.DefaultTargetLanguage = "en", "es"
	cfg.Limits = config.Limits{MaxVideoSeconds: 60, MaxVideoBytes: 50 << 20, MaxAudioBytes: 1 << 30, MaxClipBytes: 1 << 20}
	cfg.S3 = config.S3{Endpoint: bucket.Endpoint, AccessKey: bucket.AccessKey, SecretKey: bucket.SecretKey,
		UseSSL: bucket.UseSSL, Bucket: bucket.Name}
	for _, e := range edit {
		e(cfg)
	}
	objects, err := blob.New(cfg.S3)
	if err != nil {
		t.Fatal(err)
	}
	amqpURL := testenv.AMQP(t)
	conn, pub := brokertest.Dial(t, amqpURL, "console-test", broker.WithTopology(broker.Topology{}))
	ch, err := conn.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := cfg.presigner()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cfg: cfg, log: zerolog.Nop(), pool: db.Pool, objects: objects, signer: signer, pub: pub,
		queues: inspect.AMQP{Conn: conn}, events: events.New(db.Pool, zerolog.Nop()), auth: newAuth(cfg),
		logins: ratelimit.New(cfg.LoginPerMinute, cfg.LoginBurst)}
	go func() { _ = s.events.Run(ctx) }()
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return &fixture{srv: s, http: hs, pool: db.Pool, dbURL: db.URL, ch: ch, amqpURL: amqpURL}
}

// do sends a request with the bearer token (none when token is "").
func (f *fixture) do(t *testing.T, method, path, token, contentType string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, f.http.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// doJSON sends v as JSON with the admin token and decodes the answer into
// out, failing unless the status is want.
func (f *fixture) doJSON(t *testing.T, method, path string, v any, want int, out any) {
	t.Helper()
	var body io.Reader
	if v != nil {
		b, _ := json.Marshal(v)
		body = bytes.NewReader(b)
	}
	resp := f.do(t, method, path, adminToken, "application/json", body)
	decode(t, resp, want, out)
}

func decode(t *testing.T, resp *http.Response, want int, out any) {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
	}
}

// sampleVideo makes a short video with a tone and returns its path.
func sampleVideo(t *testing.T, seconds string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "in.mp4")
	cmd := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
		"testsrc=size=160x120:rate=10", "-f", "lavfi", "-i", "sine=frequency=440", "-t", seconds,
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, b)
	}
	return out
}

// multipartBody builds a form with the file at path as video.
func multipartBody(t *testing.T, path string, fields map[string]string) (string, *bytes.Buffer) {
	t.Helper()
	values := url.Values{}
	for k, v := range fields {
		values.Set(k, v)
	}
	return multipartForm(t, path, values)
}

// multipartForm builds a form with the file at path as video (named
// in.mp4) and each value of fields in order.
func multipartForm(t *testing.T, path string, fields url.Values) (string, *bytes.Buffer) {
	t.Helper()
	return multipartNamed(t, path, "in.mp4", fields)
}

// multipartNamed is multipartForm with the video's file name.
func multipartNamed(t *testing.T, path, name string, fields url.Values) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, vs := range fields {
		for _, v := range vs {
			_ = mw.WriteField(k, v)
		}
	}
	fw, err := mw.CreateFormFile("video", name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(b)
	mw.Close()
	return mw.FormDataContentType(), &buf
}

// next waits for a message in queue until the deadline.
func (f *fixture) next(t *testing.T, queue string) amqp.Delivery {
	t.Helper()
	var d amqp.Delivery
	testenv.EventuallyWithin(t, 15*time.Second, "a message in "+queue, func() bool {
		got, ok, err := f.ch.Get(queue, true)
		if err != nil {
			t.Fatalf("get %s: %v", queue, err)
		}
		d = got
		return ok
	})
	return d
}

// sseReader reads Server-Sent Events.
type sseReader struct {
	r *bufio.Reader
	// lastID is the last id field read, as EventSource keeps it.
	lastID string
}

// next returns the next event's name and data.
func (s *sseReader) next() (string, string, error) {
	var name, data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data, nil
		case strings.HasPrefix(line, "id: "):
			s.lastID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

func amqpMsg(body string) amqp.Publishing {
	return amqp.Publishing{ContentType: "application/json", Body: []byte(body)}
}

// presignedUpload reserves an upload (POST /api/uploads) and posts the
// video at path to its policy.
func (f *fixture) presignedUpload(t *testing.T, path string) upload {
	t.Helper()
	return postUpload(t, f, path)
}
