package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/admit/admittest"
	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/blob/blobtest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// silentVideo makes a short video without an audio stream.
func silentVideo(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "silent.mp4")
	cmd := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
		"testsrc=size=160x120:rate=10", "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, b)
	}
	return out
}

// randomFile writes n random bytes.
func randomFile(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	path := filepath.Join(t.TempDir(), "random.mp4")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// door submits a video with fields and returns the status and the error
// message answered.
type door func(t *testing.T, f *fixture, video string, fields map[string]string) (int, string)

// multipartDoor is POST /api/tasks with the form.
func multipartDoor(t *testing.T, f *fixture, video string, fields map[string]string) (int, string) {
	ct, body := multipartBody(t, video, fields)
	return answer(t, f.do(t, "POST", "/api/tasks", adminToken, ct, body))
}

// presignedDoor is POST /api/uploads, a POST of the video to the upload
// policy, then POST /api/tasks {sourceVideoKey, fields...}. A video the
// store refuses (over MAX_VIDEO_BYTES) answers the store's refusal.
func presignedDoor(t *testing.T, f *fixture, video string, fields map[string]string) (int, string) {
	var up upload
	f.doJSON(t, "POST", "/api/uploads", map[string]any{"contentType": "video/mp4"}, http.StatusCreated, &up)
	b, err := os.ReadFile(video)
	if err != nil {
		t.Fatal(err)
	}
	if status, msg := blobtest.Post(t, up.UploadURL, up.Fields, up.FileField, b); status/100 != 2 {
		return status, "store: " + msg
	}
	body := map[string]any{"sourceVideoKey": up.SourceVideoKey}
	for k, v := range fields {
		body[k] = v
	}
	j, _ := json.Marshal(body)
	return answer(t, f.do(t, "POST", "/api/tasks", adminToken, "application/json", bytes.NewReader(j)))
}

// answer reads a response's status and, for an error, its message.
func answer(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	var e apiError
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Message
}

// objectsUnder lists the keys under prefix in the test's bucket.
func (f *fixture) objectsUnder(t *testing.T, prefix string) []string {
	t.Helper()
	s3 := f.srv.cfg.S3
	c, err := minio.New(s3.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Secure: s3.UseSSL})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for o := range c.ListObjects(context.Background(), s3.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// nothingLeft fails unless no task, task object or message exists.
func (f *fixture) nothingLeft(t *testing.T) {
	t.Helper()
	var tasks, outbox int
	if err := f.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM outbox)`).
		Scan(&tasks, &outbox); err != nil {
		t.Fatal(err)
	}
	if tasks != 0 || outbox != 0 {
		t.Fatalf("%d task(s) and %d outbox message(s) left behind by a refused request", tasks, outbox)
	}
	for _, prefix := range []string{"videos/", "audios/", "subtitles/"} {
		if keys := f.objectsUnder(t, prefix); len(keys) != 0 {
			t.Fatalf("objects left behind by a refused request: %v", keys)
		}
	}
	if _, ok, err := f.ch.Get(wire.RoutingKey(wire.StepExtractAudio), true); err != nil || ok {
		t.Fatalf("a message was published for a refused request (%v)", err)
	}
}

// TestEveryDoorRefusesTheSameBadInputsWithTheSameText runs every bad input
// of issue 28 through the console's two doors (multipart and presigned):
// each answers the status of the refusal's kind and pkg/admit's text, and
// leaves no task, no object under videos/ and no message behind.
func TestEveryDoorRefusesTheSameBadInputsWithTheSameText(t *testing.T) {
	t.Parallel()
	const maxBytes = 2 << 20
	f := setup(t, func(c *Config) { c.Limits.MaxVideoBytes = maxBytes; c.Limits.MaxVideoSeconds = 2 })
	caps := admittest.AnnounceInstalled(t, f.pool)
	ctx := context.Background()
	good, long, silent := sampleVideo(t, "1"), sampleVideo(t, "3"), silentVideo(t)
	random, huge := randomFile(t, 1<<20), randomFile(t, maxBytes+1)
	var terms1001 strings.Builder
	for i := range 1001 {
		fmt.Fprintf(&terms1001, "term%d,t%d\n", i, i)
	}
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: caps}
	lim := admit.Limits{MaxBytes: maxBytes, MaxSeconds: 2}
	for _, tc := range []struct {
		name   string
		fields map[string]string
		video  string
		status int
		// text is the start of the message, beside what pkg/admit says.
		text string
	}{
		{"target xx", map[string]string{"target": "xx"}, good, 400, `target "xx": no translation from en to xx (installed: en→`},
		{"target tlh", map[string]string{"target": "tlh"}, good, 400, `target "tlh": no translation from en to tlh`},
		{"source zz", map[string]string{"source": "zz"}, good, 400, `source "zz": no speech recognition for zz (installed: en)`},
		{"source = target", map[string]string{"source": "es", "target": "es"}, good, 400, `target "es": the same language as the source`},
		{"11 targets", map[string]string{"target": "es,ca,fr,de,it,pt,nl,ru,ja,ko,zh"}, good, 400, `target: 11 languages, at most 10`},
		{"glossary with 3 fields", map[string]string{"glossary": "source,target\nqueue,cola,x\n"}, good, 400, `glossary: line 2: 3 fields`},
		{"glossary of 1001 terms", map[string]string{"glossary": terms1001.String()}, good, 400, `glossary: 1001 terms, at most 1000`},
		{"glossary term of 201 characters", map[string]string{"glossary": strings.Repeat("é", 201) + ",x\n"}, good, 400, `glossary: line 1:`},
		{"glossary term twice", map[string]string{"glossary": "\ufeffsource,target\ntry,a\nTry,b\n"}, good, 400, `glossary: line 3: source term "Try" is already on line 2`},
		{"glossary with an override", map[string]string{"glossary": "try,pro\u202ebar\n"}, good, 400, `glossary: line 1: target term "pro\u202ebar": U+202E (RIGHT-TO-LEFT OVERRIDE)`},
		{"glossary not UTF-8", map[string]string{"glossary": "a,b\ncaf\xe9,x\n"}, good, 400, `glossary: line 2: not valid UTF-8`},
		{"speaker with a newline", map[string]string{"speaker": "es\nf3"}, good, 400, `speaker: want a voice name`},
		{"speaker no voice has", map[string]string{"speaker": "zz9+nonexistent"}, good, 400, `speaker "zz9+nonexistent": no such voice (installed: `},
		{"random bytes", nil, random, 400, `video: not a media file`},
		{"video without audio", nil, silent, 400, `video: no audio stream`},
		{"over MAX_VIDEO_SECONDS", nil, long, 413, `video: 3s long, at most 2s (MAX_VIDEO_SECONDS=2)`},
		{"over MAX_VIDEO_BYTES", nil, huge, 413, fmt.Sprintf("video: larger than %d bytes (MAX_VIDEO_BYTES)", maxBytes)},
	} {
		// What pkg/admit says of the same input.
		req := admit.Request{Source: tc.fields["source"], Targets: []string{tc.fields["target"]},
			Speaker: tc.fields["speaker"], Glossary: tc.fields["glossary"]}
		_, want := admit.Check(req, rules)
		if want == nil {
			_, want = lim.Media(ctx, tc.video)
		}
		if want == nil || !strings.HasPrefix(want.Error(), tc.text) {
			t.Fatalf("%s: pkg/admit says %v, want %q...", tc.name, want, tc.text)
		}
		for _, d := range []struct {
			name string
			send door
		}{{"multipart", multipartDoor}, {"presigned", presignedDoor}} {
			if d.name == "presigned" && !utf8.ValidString(tc.fields["glossary"]) {
				continue // JSON carries no bytes that are not UTF-8
			}
			t.Run(d.name+"/"+tc.name, func(t *testing.T) {
				status, msg := d.send(t, f, tc.video, tc.fields)
				switch {
				case d.name == "presigned" && tc.status == http.StatusRequestEntityTooLarge && strings.HasPrefix(tc.text, "video: larger"):
					// The upload policy holds the store to MAX_VIDEO_BYTES:
					// the file never lands.
					if status != http.StatusBadRequest || !strings.Contains(msg, "EntityTooLarge") {
						t.Fatalf("%d %q, want the store's EntityTooLarge", status, msg)
					}
				case status != tc.status || msg != want.Error():
					t.Fatalf("%d %q, want %d %q", status, msg, tc.status, want.Error())
				}
				f.nothingLeft(t)
			})
		}
	}
}

// TestPresignedUploadIsSingleUse: the upload policy lives at most 15
// minutes; the task takes its own copy of the upload and removes it, so a
// later POST to the policy changes nothing the task reads, and the same
// upload cannot start a second task.
func TestPresignedUploadIsSingleUse(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.PresignSeconds = 3600 })
	ctx := context.Background()
	video := sampleVideo(t, "1")
	up := postUpload(t, f, video)
	if expires := policyExpiry(t, up); time.Until(expires) > 15*time.Minute || time.Until(up.ExpiresAt) > 15*time.Minute ||
		expires.Sub(up.ExpiresAt).Abs() > 2*time.Second {
		t.Fatalf("policy expires %s (expiresAt %s), want within 15 minutes", expires, up.ExpiresAt)
	}
	if !strings.HasPrefix(up.SourceVideoKey, "uploads/") {
		t.Fatalf("upload key %s: want a key of its own under uploads/", up.SourceVideoKey)
	}
	var c created
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey}, http.StatusCreated, &c)
	key := wire.DefaultKeys(c.TaskID).SourceVideo
	if c.TaskID != up.TaskID || c.SourceVideoKey != key {
		t.Fatalf("created %+v, want task %s reading %s", c, up.TaskID, key)
	}
	var stored string
	if err := f.pool.QueryRow(ctx, `SELECT source_video_key FROM tasks WHERE id = $1`, c.TaskID).Scan(&stored); err != nil || stored != key {
		t.Fatalf("task's source %q, %v, want %s", stored, err, key)
	}
	if _, err := f.srv.objects.Stat(ctx, up.SourceVideoKey); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the used upload is still there: %v", err)
	}
	want, _ := os.ReadFile(video)
	// The policy still works for its few minutes; it changes nothing the task reads.
	postTo(t, up, sampleVideo(t, "2"))
	got, err := f.srv.objects.Get(ctx, key, 1<<30)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("task's video after a second POST: %d bytes, %v; want the %d bytes submitted", len(got), err, len(want))
	}
	status, msg := presignedAgain(t, f, up)
	if status != http.StatusConflict || !strings.Contains(msg, "exists already") {
		t.Fatalf("second task from the same upload: %d %q, want 409", status, msg)
	}
	if got, _ := f.srv.objects.Get(ctx, key, 1<<30); !bytes.Equal(got, want) {
		t.Fatal("the task's video changed after a second POST")
	}
	// A task's own key is no upload.
	status, _ = answer(t, f.do(t, "POST", "/api/tasks", adminToken, "application/json",
		strings.NewReader(`{"sourceVideoKey":"`+key+`"}`)))
	if status != http.StatusBadRequest {
		t.Fatalf("POST naming videos/{id}/source.mp4: %d, want 400", status)
	}
}

// policyExpiry reads the expiration the upload's signed policy names.
func policyExpiry(t *testing.T, up upload) time.Time {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(up.Fields["policy"])
	if err != nil {
		t.Fatal(err)
	}
	var pol struct {
		Expiration time.Time `json:"expiration"`
	}
	if err := json.Unmarshal(raw, &pol); err != nil {
		t.Fatalf("policy %s: %v", raw, err)
	}
	return pol.Expiration
}

// presignedAgain posts the upload's key again.
func presignedAgain(t *testing.T, f *fixture, up upload) (int, string) {
	b, _ := json.Marshal(map[string]any{"sourceVideoKey": up.SourceVideoKey})
	return answer(t, f.do(t, "POST", "/api/tasks", adminToken, "application/json", bytes.NewReader(b)))
}

// TestConsoleGlossaryLandsInTaskGlossaries: a glossary sent to the console
// (as dubctl's CSV) is in the task's first message and, once extract_audio
// (the real worker, as a process) ran, in task_glossaries, where translate
// reads it.
func TestConsoleGlossaryLandsInTaskGlossaries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dir, err := testenv.SharedBinaries("extract_audio")
	if err != nil {
		t.Fatal(err)
	}
	s3 := f.srv.cfg.S3
	p := testenv.StartProc(t, dir, "extract_audio", map[string]string{"DATABASE_URL": f.dbURL, "AMQP_URL": f.amqpURL,
		"S3_ENDPOINT": s3.Endpoint, "S3_ACCESS_KEY": s3.AccessKey, "S3_SECRET_KEY": s3.SecretKey, "S3_BUCKET": s3.Bucket,
		"S3_USE_SSL": strconv.FormatBool(s3.UseSSL), "LOG_LEVEL": "warn", "PATH": os.Getenv("PATH")})
	t.Cleanup(func() { p.Stop(t, true) })
	p.WaitReady(t)
	const csv = "source,target\n# kept as they are\ndubflow,\nqueue,cola\n"
	video := sampleVideo(t, "1")
	for name, send := range map[string]door{"multipart": multipartDoor, "presigned": presignedDoor} {
		if status, msg := send(t, f, video, map[string]string{"glossary": csv}); status != http.StatusCreated {
			t.Fatalf("%s: %d %s", name, status, msg)
		}
	}
	var ids []string
	rows, err := f.pool.Query(ctx, `SELECT id::text FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	if len(ids) != 2 {
		t.Fatalf("%d tasks, want 2", len(ids))
	}
	for _, id := range ids {
		var terms string
		testenv.Eventually(t, "glossary of "+id+" in task_glossaries", func() bool {
			var status string
			if err := f.pool.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&status); err == nil && status == "failed" {
				t.Fatalf("task %s failed", id)
			}
			return f.pool.QueryRow(ctx, `SELECT terms::text FROM task_glossaries WHERE task_id = $1`, id).Scan(&terms) == nil
		})
		var got []wire.Term
		if err := json.Unmarshal([]byte(terms), &got); err != nil || len(got) != 2 || got[0].Source != "dubflow" ||
			got[0].Target != "" || got[1].Source != "queue" || got[1].Target != "cola" {
			t.Fatalf("task_glossaries of %s: %s (%v)", id, terms, err)
		}
	}
	if keys := f.objectsUnder(t, "videos/"); len(keys) != 2 {
		t.Fatalf("objects %v, want the two source videos and no glossary.txt", keys)
	}
}
