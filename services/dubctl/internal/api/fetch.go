package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
)

// Changed waits within: the console's task is read again after it.
func (c *Client) Changed(ctx context.Context, _ uuid.UUID, within time.Duration) error {
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
func (c *Client) Fetch(ctx context.Context, t *view.Task, key, path string, limit int64) error {
	link := linkOf(t, key)
	if link == "" {
		return fmt.Errorf("%s: %w (the console gave no link)", key, shape.ErrNoObject)
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
		return fmt.Errorf("download %s: %w", path, shape.ErrNoObject)
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
