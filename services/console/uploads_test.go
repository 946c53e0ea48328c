package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/blob/blobtest"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/uploads"
	"github.com/google/uuid"
)

// withPresignUser gives the console a presign user of its own, created on
// the test's bucket by the real migrate (testenv.PresignUser).
func withPresignUser(t *testing.T) func(*Config) {
	return func(c *Config) {
		t.Helper()
		c.PresignUser = testenv.PresignUser(t, c.S3)
	}
}

// postUpload reserves an upload for the file at path and posts the file
// to it; it fails unless the store takes it.
func postUpload(t *testing.T, f *fixture, path string) upload {
	t.Helper()
	var up upload
	f.doJSON(t, "POST", "/api/uploads", map[string]any{"contentType": "video/mp4"}, http.StatusCreated, &up)
	postTo(t, up, path)
	return up
}

// postTo posts the file at path to the upload's policy.
func postTo(t *testing.T, up upload, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := blobtest.Post(t, up.UploadURL, up.Fields, up.FileField, b); status/100 != 2 {
		t.Fatalf("POST to the upload policy: %d %s", status, body)
	}
}

// TestUploadsAndLinksAreSignedByThePresignUser: with a presign user, the
// upload policy and the output links carry its name, never the main
// user's; the upload goes through, and the source video (which that user
// may not read) is served by the console itself, ranges included.
func TestUploadsAndLinksAreSignedByThePresignUser(t *testing.T) {
	t.Parallel()
	f := setup(t, withPresignUser(t))
	user := f.srv.cfg.PresignUser.AccessKey
	var up upload
	f.doJSON(t, "POST", "/api/uploads", map[string]any{"contentType": "video/mp4"}, http.StatusCreated, &up)
	if cred := up.Fields["x-amz-credential"]; !strings.HasPrefix(cred, user+"/") {
		t.Fatalf("upload policy's x-amz-credential %q, want the presign user %s", cred, user)
	}
	if up.Method != http.MethodPost || up.FileField != blob.UploadFileField || up.MaxBytes != f.srv.cfg.Limits.MaxVideoBytes {
		t.Fatalf("upload %+v: want a POST policy of at most MAX_VIDEO_BYTES", up)
	}
	video := sampleVideo(t, "1")
	postTo(t, up, video)
	var c created
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey}, http.StatusCreated, &c)
	link := f.srv.presign(context.Background(), "outputs/"+c.TaskID.String()+"/final.mp4")
	if u, err := url.Parse(*link); err != nil || !strings.HasPrefix(u.Query().Get("X-Amz-Credential"), user+"/") {
		t.Fatalf("output link %s: want X-Amz-Credential of the presign user %s", *link, user)
	}
	var d taskDetail
	f.doJSON(t, "GET", "/api/tasks/"+c.TaskID.String(), nil, http.StatusOK, &d)
	want := "/api/tasks/" + c.TaskID.String() + "/source-video"
	if d.Links.Source == nil || *d.Links.Source != want || d.Links.DubAudio != nil {
		t.Fatalf("source link %v, dub audio %v: want %s and none", d.Links.Source, d.Links.DubAudio, want)
	}
	data, _ := os.ReadFile(video)
	resp := f.do(t, "GET", want, readToken, "", nil)
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) || resp.Header.Get("Content-Type") != "video/mp4" {
		t.Fatalf("GET %s: %d %s, %d bytes; want 200 video/mp4 and the %d bytes uploaded", want, resp.StatusCode,
			resp.Header.Get("Content-Type"), len(got), len(data))
	}
	req, _ := http.NewRequest("GET", f.http.URL+want, nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	req.Header.Set("Range", "bytes=10-19")
	rr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(rr.Body)
	rr.Body.Close()
	if rr.StatusCode != http.StatusPartialContent || !bytes.Equal(part, data[10:20]) {
		t.Fatalf("range request: %d %q, want 206 and bytes 10-19", rr.StatusCode, part)
	}
	decode(t, f.do(t, "GET", want, "", "", nil), http.StatusUnauthorized, nil)
	decode(t, f.do(t, "GET", "/api/tasks/"+c.TaskID.String()+"/dub-audio", readToken, "", nil), http.StatusNotFound, nil)
	decode(t, f.do(t, "GET", "/api/tasks/"+uuid.NewString()+"/source-video", readToken, "", nil), http.StatusNotFound, nil)
}

// TestUploadPolicyLimitsSizeAndType: the store refuses a file over
// MAX_VIDEO_BYTES and one of another type than the policy's, so nothing
// is stored and no task can start from it; the console refuses to sign
// for a type that is not a video.
func TestUploadPolicyLimitsSizeAndType(t *testing.T) {
	t.Parallel()
	const limit = 4096
	f := setup(t, func(c *Config) { c.Limits.MaxVideoBytes = limit })
	var up upload
	f.doJSON(t, "POST", "/api/uploads", map[string]any{"contentType": "video/webm"}, http.StatusCreated, &up)
	if up.ContentType != "video/webm" || up.MaxBytes != limit {
		t.Fatalf("upload %+v: want video/webm of at most %d bytes", up, limit)
	}
	status, body := blobtest.Post(t, up.UploadURL, up.Fields, up.FileField, make([]byte, limit+1))
	if status != http.StatusBadRequest || !strings.Contains(body, "EntityTooLarge") {
		t.Fatalf("a file of MAX_VIDEO_BYTES+1: %d %s, want the store's EntityTooLarge", status, body)
	}
	other := map[string]string{}
	for k, v := range up.Fields {
		other[k] = v
	}
	other["Content-Type"] = "text/html"
	if status, body := blobtest.Post(t, up.UploadURL, other, up.FileField, []byte("<script>")); status/100 == 2 {
		t.Fatalf("a file of another type: %d %s, want refused", status, body)
	}
	if keys := f.objectsUnder(t, "uploads/"); len(keys) != 0 {
		t.Fatalf("refused uploads stored: %v", keys)
	}
	status, msg := presignedAgain(t, f, up)
	if status != http.StatusBadRequest || !strings.Contains(msg, "nothing uploaded there") {
		t.Fatalf("task from a refused upload: %d %q", status, msg)
	}
	for _, bad := range []string{"text/html", "video/mp4; charset=x", "application/octet-stream", "video"} {
		resp := f.do(t, "POST", "/api/uploads", adminToken, "application/json", strings.NewReader(`{"contentType":"`+bad+`"}`))
		decode(t, resp, http.StatusBadRequest, nil)
	}
}

// TestRefusedUploadIsRemovedAtOnce: an upload admission refuses (not a
// media file) is gone with the refusal; one whose request's fields were
// refused (the speaker) stays for the corrected request, which starts the
// task.
func TestRefusedUploadIsRemovedAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	up := postUpload(t, f, randomFile(t, 2048))
	if status, msg := presignedAgain(t, f, up); status != http.StatusBadRequest || !strings.Contains(msg, "not a media file") {
		t.Fatalf("random bytes: %d %q", status, msg)
	}
	if keys := f.objectsUnder(t, "uploads/"); len(keys) != 0 {
		t.Fatalf("refused upload left behind: %v", keys)
	}
	up = postUpload(t, f, sampleVideo(t, "1"))
	badSpeaker := map[string]any{"sourceVideoKey": up.SourceVideoKey, "speaker": "es\nf3"}
	f.doJSON(t, "POST", "/api/tasks", badSpeaker, http.StatusBadRequest, nil)
	if keys := f.objectsUnder(t, "uploads/"); len(keys) != 1 {
		t.Fatalf("uploads after a refusal of the fields: %v, want the upload kept", keys)
	}
	var c created
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey}, http.StatusCreated, &c)
	if keys := f.objectsUnder(t, "uploads/"); len(keys) != 0 {
		t.Fatalf("uploads after the task took it: %v", keys)
	}
}

// TestTakenUploadCannotAffectTheTask: after the task took its upload, a
// new POST to the same policy (still within its lifetime) changes nothing
// the task reads and cannot start a task; the console removes what it
// wrote when a request names it, and the sweeper on its next pass.
func TestTakenUploadCannotAffectTheTask(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	video := sampleVideo(t, "1")
	up := postUpload(t, f, video)
	var c created
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey}, http.StatusCreated, &c)
	key := wire.DefaultKeys(c.TaskID).SourceVideo
	want, _ := os.ReadFile(video)
	for round := range 2 {
		postTo(t, up, sampleVideo(t, "2"))
		if round == 0 {
			if status, _ := presignedAgain(t, f, up); status != http.StatusConflict {
				t.Fatalf("a second task from the upload: %d, want 409", status)
			}
		} else {
			removed, err := f.srv.uploadStore().SweepOnce(ctx, time.Now())
			if err != nil || removed[up.SourceVideoKey] != uploads.DropTaken {
				t.Fatalf("sweep: %v, %v; want %s removed as taken", removed, err, up.SourceVideoKey)
			}
		}
		if keys := f.objectsUnder(t, "uploads/"); len(keys) != 0 {
			t.Fatalf("round %d: a taken upload's new object stays: %v", round, keys)
		}
		if got, err := f.srv.objects.Get(ctx, key, 1<<30); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d: the task's video changed (%d bytes, %v)", round, len(got), err)
		}
	}
}

// TestSweeperRemovesUploadsPastTheirDeadline: an upload no task took is
// kept until its policy's lifetime plus uploads.Margin after it was
// written, then removed — but never while a request holds its lock; and
// POST /api/tasks refuses it past that deadline.
func TestSweeperRemovesUploadsPastTheirDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.PresignSeconds = 120 })
	ctx := context.Background()
	up := postUpload(t, f, sampleVideo(t, "1"))
	info, err := f.srv.objects.Stat(ctx, up.SourceVideoKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.srv.uploadStore().Deadline(); got != 2*time.Minute+uploads.Margin {
		t.Fatalf("deadline %s, want the policy's 2m plus %s", got, uploads.Margin)
	}
	due := info.Modified.Add(f.srv.uploadStore().Deadline())
	sweep := func(now time.Time) map[string]string {
		t.Helper()
		removed, err := f.srv.uploadStore().SweepOnce(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		return removed
	}
	if removed := sweep(due.Add(-time.Second)); len(removed) != 0 {
		t.Fatalf("removed before the deadline: %v", removed)
	}
	unlock, err := f.srv.uploadStore().Lock(ctx, up.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if removed := sweep(due.Add(time.Second)); len(removed) != 0 {
		t.Fatalf("removed while a request takes it: %v", removed)
	}
	unlock()
	if removed := sweep(due.Add(time.Second)); removed[up.SourceVideoKey] != uploads.DropExpired {
		t.Fatalf("past the deadline: removed %v, want %s as expired", removed, up.SourceVideoKey)
	}
	if err := f.srv.uploadStore().Expired(info.Modified, due.Add(time.Second)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("POST /api/tasks past the deadline: %v, want refused as expired", err)
	}
	if err := f.srv.uploadStore().Expired(info.Modified, due); err != nil {
		t.Fatalf("POST /api/tasks at the deadline: %v", err)
	}
	if err := f.srv.objects.Put(ctx, "uploads/stray", strings.NewReader("x"), 1, "video/mp4"); err != nil {
		t.Fatal(err)
	}
	if removed := sweep(time.Now().Add(f.srv.uploadStore().Deadline() + time.Minute)); removed["uploads/stray"] != uploads.DropExpired {
		t.Fatalf("a stray key under uploads/: removed %v, want it gone by age", removed)
	}
	if _, err := f.srv.objects.Stat(ctx, "uploads/stray"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("stray upload: %v", err)
	}
}

// TestPresignUserSettingsAreChecked: both presign settings or neither,
// and another user than the main one.
func TestPresignUserSettingsAreChecked(t *testing.T) {
	t.Parallel()
	cfg := Config{APIToken: adminToken, SessionHours: 1, PresignSeconds: 600, LoginPerMinute: 10, LoginBurst: 5}
	cfg.S3 = config.S3{Endpoint: "localhost:9000", Bucket: "dubflow", AccessKey: "minioadmin", SecretKey: "minioadmin"}
	for _, bad := range []config.S3Presign{{AccessKey: "p"}, {AccessKey: "minioadmin", SecretKey: "12345678"}} {
		cfg.PresignUser = bad
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "S3_PRESIGN") {
			t.Errorf("%+v: %v, want refused", bad, err)
		}
	}
	cfg.PresignUser = config.S3Presign{AccessKey: "presign", SecretKey: "12345678"}
	if err := cfg.Validate(); err != nil && strings.Contains(err.Error(), "S3_PRESIGN") {
		t.Fatal(err)
	}
	p, err := cfg.presigner()
	if err != nil || p.AccessKey() != "presign" {
		t.Fatalf("presigner signs as %v (%v), want presign", p, err)
	}
	cfg.PresignUser = config.S3Presign{}
	if p, _ := cfg.presigner(); p.AccessKey() != "minioadmin" {
		t.Fatalf("without a presign user the presigner signs as %s, want the main user", p.AccessKey())
	}
}
