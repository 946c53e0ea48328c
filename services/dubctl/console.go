package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// consolePoll is how often console mode's wait reads the task again.
const consolePoll = time.Second

// consoleBackend is console mode: dubctl calls the console's API
// (services/console/API.md) with the bearer token and needs no database,
// broker or storage credentials; the API answers the read model's JSON.
type consoleBackend struct {
	base  string
	token string
	http  *http.Client
}

// consoleFromEnv returns console mode when CONSOLE_URL and
// DUBFLOW_API_TOKEN are set and DATABASE_URL is not, nil otherwise.
func consoleFromEnv(getenv func(string) string) *consoleBackend {
	base, token := getenv("CONSOLE_URL"), getenv("DUBFLOW_API_TOKEN")
	if base == "" || token == "" || getenv("DATABASE_URL") != "" {
		return nil
	}
	return &consoleBackend{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{}}
}

// Close has nothing to release.
func (c *consoleBackend) Close() {}

// consoleError is the console's error body.
type consoleError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// do sends a request and decodes a JSON answer into out. An answer other
// than 2xx is an error whose text is the console's message as it is — the
// text the same error has in database mode — a usage error (exit 2) for
// 400 and 413. headers are added to the request.
func (c *consoleBackend) do(ctx context.Context, method, path, contentType string, body io.Reader, out any, headers ...[2]string) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("console %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("console %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return answerError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("console %s %s: decode: %w", method, path, err)
	}
	return nil
}

// answerError is the error of an answer other than 2xx: the console's
// message; an answer that is not the console's error (a proxy's page) is
// named by its status.
func answerError(resp *http.Response) error {
	var e consoleError
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var err error
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		err = errors.New(e.Message)
	} else {
		err = fmt.Errorf("console %s: HTTP %d: %s", resp.Request.URL.Redacted(), resp.StatusCode,
			shorten(strings.TrimSpace(string(b)), 200))
	}
	if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusRequestEntityTooLarge {
		return usageError(err)
	}
	return err
}

// get reads path into out.
func (c *consoleBackend) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, "", nil, out)
}

// post sends body as JSON to path and reads the answer into out.
func (c *consoleBackend) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("console POST %s: %w", path, err)
	}
	return c.do(ctx, http.MethodPost, path, "application/json", bytes.NewReader(b), out)
}

func taskPath(id uuid.UUID, tail string) string { return "/api/tasks/" + id.String() + tail }

// Task reads GET /api/tasks/{id}.
func (c *consoleBackend) Task(ctx context.Context, id uuid.UUID) (*view.Task, error) {
	var t view.Task
	return &t, c.get(ctx, taskPath(id, ""), &t)
}

// List reads GET /api/tasks with the search.
func (c *consoleBackend) List(ctx context.Context, f listFilter) (view.Page, error) {
	q := url.Values{"status": {f.Status}, "limit": {fmt.Sprint(f.Limit)}, "cursor": {f.Cursor},
		"includeChildren": {fmt.Sprint(f.WithChildren)}, "q": {f.Q}, "language": {f.Language}, "error": {f.Error},
		"since": {f.since}, "until": {f.until}}
	var p view.Page
	return p, c.get(ctx, "/api/tasks?"+query(q), &p)
}

// query encodes q without its empty values.
func query(q url.Values) string {
	for k, v := range q {
		if len(v) == 1 && v[0] == "" {
			delete(q, k)
		}
	}
	return q.Encode()
}

// Segments reads GET /api/tasks/{id}/segments.
func (c *consoleBackend) Segments(ctx context.Context, id uuid.UUID) ([]view.Segment, error) {
	var out struct {
		Segments []view.Segment `json:"segments"`
	}
	return out.Segments, c.get(ctx, taskPath(id, "/segments"), &out)
}

// Versions reads GET /api/tasks/{id}/versions.
func (c *consoleBackend) Versions(ctx context.Context, id uuid.UUID) ([]view.Version, error) {
	var out struct {
		Versions []view.Version `json:"versions"`
	}
	return out.Versions, c.get(ctx, taskPath(id, "/versions"), &out)
}

// DeadLetters reads GET /api/dead-letters.
func (c *consoleBackend) DeadLetters(ctx context.Context, f view.DeadLetterFilter) ([]view.DeadLetter, error) {
	q := url.Values{"step": {f.Step}, "limit": {fmt.Sprint(f.Limit)}, "pending": {fmt.Sprint(f.Pending)}}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	var out struct {
		DeadLetters []view.DeadLetter `json:"deadLetters"`
	}
	return out.DeadLetters, c.get(ctx, "/api/dead-letters?"+q.Encode(), &out)
}

// DeadLetter reads GET /api/dead-letters/{id}.
func (c *consoleBackend) DeadLetter(ctx context.Context, id int64) (*view.DeadLetter, error) {
	var d view.DeadLetter
	return &d, c.get(ctx, fmt.Sprintf("/api/dead-letters/%d", id), &d)
}

// Rules are the default languages and media limits of dubctl's
// environment, without capabilities: dubctl has no database here, so the
// console judges what the engines can do (with the same pkg/admit text).
func (c *consoleBackend) Rules(context.Context) (admit.Rules, admit.Limits, error) {
	var cfg struct {
		config.Common
		config.Limits
	}
	if err := config.Load(config.Environ(), &cfg); err != nil {
		return admit.Rules{}, admit.Limits{}, err
	}
	return admit.Rules{DefaultSource: cfg.DefaultSourceLanguage, DefaultTarget: cfg.DefaultTargetLanguage},
		admit.LimitsOf(cfg.Limits), nil
}

// Submit streams the video to POST /api/tasks as a multipart form (never
// whole in memory) with the languages, speaker, glossary and subtitles.
func (c *consoleBackend) Submit(ctx context.Context, s submission) (uuid.UUID, error) {
	f, err := os.Open(s.input)
	if err != nil {
		return uuid.Nil, usageError(fmt.Errorf("input: %w", err))
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, kv := range [][2]string{{"source", s.req.Source}, {"target", strings.Join(s.req.Targets, ",")},
			{"speaker", s.req.Speaker}, {"glossary", s.req.Glossary}, {"subtitlesLanguage", s.req.SubtitlesLanguage},
			{"burnSubtitles", s.req.BurnSubtitles}, {"review", strings.Join(s.req.Review, ",")},
			{"project", s.project}} {
			if kv[1] != "" {
				_ = mw.WriteField(kv[0], kv[1])
			}
		}
		for _, kv := range [][2]string{{"subtitles", s.req.Subtitles}, {"sourceSubtitles", s.req.SourceSubtitles}} {
			if kv[1] != "" {
				if part, err := mw.CreateFormFile(kv[0], kv[0]); err == nil {
					_, _ = io.WriteString(part, kv[1])
				}
			}
		}
		part, err := mw.CreateFormFile("video", filepath.Base(s.input))
		if err == nil {
			_, err = io.Copy(part, f)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	var created struct {
		TaskID uuid.UUID `json:"taskId"`
	}
	var headers [][2]string
	if s.idempotencyKey != "" {
		headers = append(headers, [2]string{"Idempotency-Key", s.idempotencyKey})
	}
	if err := c.do(ctx, http.MethodPost, "/api/tasks", mw.FormDataContentType(), pr, &created, headers...); err != nil {
		return uuid.Nil, err
	}
	return created.TaskID, nil
}

// Redub sends POST /api/tasks/{id}/redub.
func (c *consoleBackend) Redub(ctx context.Context, id uuid.UUID, n int, text string) (*dub.Redubbed, error) {
	var r dub.Redubbed
	return &r, c.post(ctx, taskPath(id, "/redub"), map[string]any{"segment": n, "text": text}, &r)
}

// Replay sends POST /api/dead-letters/{id}/replay.
func (c *consoleBackend) Replay(ctx context.Context, id int64, force bool) (dlq.Replayed, error) {
	var r dlq.Replayed
	return r, c.post(ctx, fmt.Sprintf("/api/dead-letters/%d/replay", id), map[string]bool{"force": force}, &r)
}

// Changed waits within: the console's task is read again after it.
func (c *consoleBackend) Changed(ctx context.Context, _ uuid.UUID, within time.Duration) error {
	t := time.NewTimer(min(within, consolePoll))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Fetch downloads key through the presigned link the console gave for it
// in t (no token is sent to the object store).
func (c *consoleBackend) Fetch(ctx context.Context, t *view.Task, key, path string, limit int64) error {
	link := linkOf(t, key)
	if link == "" {
		return fmt.Errorf("%s: %w (the console gave no link)", key, errNoObject)
	}
	return fetchTo(ctx, c.http, link, path, limit)
}

// linkOf finds the presigned URL of key among t's links and its
// children's.
func linkOf(t *view.Task, key string) string {
	find := func(result []byte, output, burned *string, subs []view.SubtitleLink) string {
		res := view.OutputOf(result)
		switch {
		case output != nil && res.OutputVideoKey == key:
			return *output
		case burned != nil && res.BurnedVideoKey == key:
			return *burned
		}
		for _, s := range subs {
			if s.Key == key {
				return s.URL
			}
		}
		return ""
	}
	if u := find(t.Result, t.Links.Output, t.Links.Burned, t.Links.Subtitles); u != "" {
		return u
	}
	for _, ch := range t.ChildrenOf() {
		if u := find(ch.Result, ch.Links.Output, ch.Links.Burned, ch.Links.Subtitles); u != "" {
			return u
		}
	}
	return ""
}

// fetchTo downloads link (a presigned URL: no token is sent) to path, at
// most limit bytes, through a temporary file renamed into place.
func fetchTo(ctx context.Context, client *http.Client, link, path string, limit int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("download %s: %w", path, errNoObject)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("download %s: HTTP %d from the object store", path, resp.StatusCode)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("download %s: %w", path, err)
	case n > limit:
		return fmt.Errorf("download %s: more than %d bytes, limit %d bytes (MAX_VIDEO_BYTES+MAX_AUDIO_BYTES)", path, limit, limit)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("download %s: %w", path, err)
	}
	return nil
}
