package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/services/console/internal/idempotent"
)

// submitWithKey posts a multipart submission of the video at path with the
// Idempotency-Key key ("" for none) and returns the status, the body and
// whether the answer was replayed.
func (f *fixture) submitWithKey(t *testing.T, path, key string, fields map[string]string) (int, []byte, bool) {
	t.Helper()
	ct, body := multipartBody(t, path, fields)
	req, err := http.NewRequest("POST", f.http.URL+"/api/tasks", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", ct)
	if key != "" {
		req.Header.Set(idempotent.Header, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header.Get("Idempotent-Replayed") == "true"
}

// counts returns the tasks and the objects under videos/.
func (f *fixture) counts(t *testing.T) (tasks, videos int) {
	t.Helper()
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM tasks`).Scan(&tasks); err != nil {
		t.Fatal(err)
	}
	return tasks, len(f.objectsUnder(t, "videos/"))
}

// TestIdempotencyKeyAnswersTheFirstSubmission: the same submission with
// one key answers the first 201 and body again and creates nothing more;
// another submission with the key is 409; a refused submission leaves its
// key free.
func TestIdempotencyKeyAnswersTheFirstSubmission(t *testing.T) {
	t.Parallel()
	f := setup(t)
	video := sampleVideo(t, "1")
	fields := map[string]string{"source": "en", "target": "es"}
	status, first, replayed := f.submitWithKey(t, video, "upload-1", fields)
	if status != http.StatusCreated || replayed {
		t.Fatalf("first: %d %s (replayed %v)", status, first, replayed)
	}
	status, again, replayed := f.submitWithKey(t, video, "upload-1", fields)
	if status != http.StatusCreated || !replayed || !bytes.Equal(again, first) {
		t.Fatalf("again: %d %s (replayed %v), want 201 %s replayed", status, again, replayed, first)
	}
	if tasks, videos := f.counts(t); tasks != 1 || videos != 1 {
		t.Fatalf("%d tasks and %d videos after a repeated submission, want 1 and 1", tasks, videos)
	}
	status, body, _ := f.submitWithKey(t, video, "upload-1", map[string]string{"source": "en", "target": "ca"})
	if status != http.StatusConflict || !strings.Contains(string(body), `"idempotency_key_reused"`) {
		t.Fatalf("another submission with the key: %d %s, want 409 idempotency_key_reused", status, body)
	}
	status, body, _ = f.submitWithKey(t, video, "upload-2", map[string]string{"source": "en", "target": "EN!"})
	if status != http.StatusBadRequest {
		t.Fatalf("a refused submission: %d %s", status, body)
	}
	if status, body, _ = f.submitWithKey(t, video, "upload-2", fields); status != http.StatusCreated {
		t.Fatalf("the key of a refused submission, used again: %d %s, want it judged afresh", status, body)
	}
}

// TestConcurrentSubmissionsWithAndWithoutAKey: three identical
// submissions at once with one key create one task and get one answer;
// without a key they are three tasks.
func TestConcurrentSubmissionsWithAndWithoutAKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	video := sampleVideo(t, "1")
	fields := map[string]string{"source": "en", "target": "es"}

	type answer struct {
		status int
		body   string
	}
	concurrently := func(key string) []answer {
		out := make([]answer, 3)
		var wg sync.WaitGroup
		for i := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, b, _ := f.submitWithKey(t, video, key, fields)
				out[i] = answer{s, string(b)}
			}()
		}
		wg.Wait()
		return out
	}
	same := concurrently("upload-3")
	for _, a := range same {
		if a != same[0] || a.status != http.StatusCreated {
			t.Fatalf("concurrent submissions with one key: %+v, want one 201 answer three times", same)
		}
	}
	if tasks, _ := f.counts(t); tasks != 1 {
		t.Fatalf("concurrent submissions with one key made %d tasks, want 1", tasks)
	}
	for _, a := range concurrently("") {
		if a.status != http.StatusCreated {
			t.Fatalf("a submission without a key: %+v", a)
		}
	}
	if tasks, _ := f.counts(t); tasks != 4 {
		t.Fatalf("three identical submissions without a key made %d tasks, want 3", tasks-1)
	}
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d keys remembered (%v), want upload-3's", n, err)
	}
}

// TestIdempotencyKeyOfAPresignedUpload: the JSON submission of an upload
// sent again with its key answers the first 201, not "task exists".
func TestIdempotencyKeyOfAPresignedUpload(t *testing.T) {
	t.Parallel()
	f := setup(t)
	up := f.presignedUpload(t, sampleVideo(t, "1"))
	post := func(body string) *http.Response {
		req, _ := http.NewRequest("POST", f.http.URL+"/api/tasks", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idempotent.Header, "presigned-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	var first, again created
	decode(t, post(`{"sourceVideoKey": "`+up.SourceVideoKey+`", "target": "es"}`), http.StatusCreated, &first)
	// The same value, its keys in another order and spaced otherwise.
	resp := post(`{"target":"es","sourceVideoKey":"` + up.SourceVideoKey + `"}`)
	if resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same JSON submission again was not a replay")
	}
	decode(t, resp, http.StatusCreated, &again)
	if again.TaskID != first.TaskID || again.SourceVideoKey != first.SourceVideoKey || first.TaskID != up.TaskID {
		t.Fatalf("again %+v, want %+v", again, first)
	}
	if _, err := f.srv.objects.Stat(context.Background(), up.SourceVideoKey); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the upload after its task took it: %v, want it removed", err)
	}
}

// TestIdempotencyKeyIsChecked: an empty, repeated or unprintable key is
// refused before anything is read.
func TestIdempotencyKeyIsChecked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, keys := range [][]string{{""}, {"a", "b"}, {"with space"}, {strings.Repeat("k", 256)}} {
		req, _ := http.NewRequest("POST", f.http.URL+"/api/tasks", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header[idempotent.Header] = keys
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e apiError
		decode(t, resp, http.StatusBadRequest, &e)
		resp.Body.Close()
		if !strings.Contains(e.Message, idempotent.Header) {
			t.Errorf("keys %q: %q, want the header named", keys, e.Message)
		}
	}
}
