package blob_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// TestLinksAreAlignedAndWork: links made in the same window are the same
// URL, the next window's another; MinIO serves the object at both.
func TestLinksAreAlignedAndWork(t *testing.T) {
	t.Parallel()
	b := testenv.S3(t)
	cfg := config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey, Bucket: b.Name, UseSSL: b.UseSSL}
	s, err := blob.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "outputs/x/final.en.srt", strings.NewReader("subtitle"), -1, "text/plain"); err != nil {
		t.Fatal(err)
	}
	p, err := blob.NewPresigner(cfg, "", "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	start := now.Truncate(blob.LinkWindow)
	sign := func(at time.Time) string {
		u, err := blob.PresignGetAt(p, ctx, "outputs/x/final.en.srt", time.Hour, "final.en.srt", at)
		if err != nil {
			t.Fatal(err)
		}
		return u.String()
	}
	first, same, next := sign(start), sign(start.Add(blob.LinkWindow-time.Millisecond)), sign(start.Add(blob.LinkWindow))
	if first != same || first == next {
		t.Fatalf("links of one window differ or of two windows agree:\n%s\n%s\n%s", first, same, next)
	}
	if q, _ := url.Parse(first); q.Query().Get("X-Amz-Expires") != "3900" {
		t.Errorf("a link asked for an hour lives %s s, want 3900 (the hour and the window)", q.Query().Get("X-Amz-Expires"))
	}
	for _, link := range []string{first, sign(now)} {
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "subtitle" {
			t.Fatalf("GET %s: %d %s", link, resp.StatusCode, body)
		}
	}
}
