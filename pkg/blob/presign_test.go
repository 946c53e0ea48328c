package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/blob/blobtest"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// TestPresignedPostHoldsToItsPolicy: the store itself refuses what the
// policy does not allow — a file over MaxBytes, an empty one, another
// content type, another key, and a field changed after signing — and
// stores what it allows, under the key and with the type signed.
func TestPresignedPostHoldsToItsPolicy(t *testing.T) {
	t.Parallel()
	b := testenv.S3(t)
	cfg := config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey, Bucket: b.Name, UseSSL: b.UseSSL}
	store, err := blob.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := blob.NewPresigner(cfg, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const key, limit = "uploads/a/source.mp4", 1000
	up, err := p.PresignPost(ctx, blob.UploadPolicy{Key: key, Expiry: time.Minute, MaxBytes: limit, ContentType: "video/mp4"})
	if err != nil {
		t.Fatal(err)
	}
	if got := up.Fields["x-amz-credential"]; !strings.HasPrefix(got, b.AccessKey+"/") {
		t.Fatalf("x-amz-credential %q, want the signing user %s", got, b.AccessKey)
	}
	with := func(k, v string) map[string]string {
		f := map[string]string{}
		for a, b := range up.Fields {
			f[a] = b
		}
		f[k] = v
		return f
	}
	for _, tc := range []struct {
		name   string
		fields map[string]string
		size   int
	}{
		{"over MaxBytes", up.Fields, limit + 1},
		{"empty", up.Fields, 0},
		{"another content type", with("Content-Type", "text/html"), 10},
		{"another key", with("key", "outputs/a/final.mp4"), 10},
		{"a longer life", with("policy", up.Fields["policy"]+"x"), 10},
	} {
		status, body := blobtest.Post(t, up.URL.String(), tc.fields, blob.UploadFileField, bytes.Repeat([]byte{1}, tc.size))
		if status/100 == 2 {
			t.Errorf("%s: the store took it (%d)", tc.name, status)
		}
		if tc.name == "over MaxBytes" && !strings.Contains(body, "EntityTooLarge") {
			t.Errorf("%s: %d %s, want EntityTooLarge", tc.name, status, body)
		}
		for _, k := range []string{key, "outputs/a/final.mp4"} {
			if _, err := store.Stat(ctx, k); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("%s: %s exists after a refused upload (%v)", tc.name, k, err)
			}
		}
	}
	data := bytes.Repeat([]byte("v"), limit)
	if status, body := blobtest.Post(t, up.URL.String(), up.Fields, blob.UploadFileField, data); status/100 != 2 {
		t.Fatalf("upload within the policy: %d %s", status, body)
	}
	info, err := store.Stat(ctx, key)
	if err != nil || info.Size != limit || info.ContentType != "video/mp4" {
		t.Fatalf("stored upload %+v, %v; want %d bytes of video/mp4", info, err, limit)
	}
}

// TestPresignedPostExpires: a policy signed for a lifetime that has passed
// is refused by the store.
func TestPresignedPostExpires(t *testing.T) {
	t.Parallel()
	b := testenv.S3(t)
	cfg := config.S3{Endpoint: b.Endpoint, AccessKey: b.AccessKey, SecretKey: b.SecretKey, Bucket: b.Name, UseSSL: b.UseSSL}
	p, err := blob.NewPresigner(cfg, "", "")
	if err != nil {
		t.Fatal(err)
	}
	// A lifetime of a nanosecond is over before the POST is sent: the
	// expiration is written in the policy, to the millisecond, and S3
	// compares it with its own clock.
	up, err := p.PresignPost(context.Background(), blob.UploadPolicy{Key: "uploads/b/source.mp4", Expiry: time.Nanosecond,
		MaxBytes: 10, ContentType: "video/mp4"})
	if err != nil {
		t.Fatal(err)
	}
	status, body := blobtest.Post(t, up.URL.String(), up.Fields, blob.UploadFileField, []byte("x"))
	if status != http.StatusForbidden || !strings.Contains(body, "xpired") {
		t.Fatalf("expired policy: %d %s, want 403 expired", status, body)
	}
}

func TestPresignerChecksItsPublicURL(t *testing.T) {
	t.Parallel()
	cfg := config.S3{Endpoint: "localhost:9000", AccessKey: "a", SecretKey: "b", Bucket: "dubflow"}
	for _, bad := range []string{"localhost:9000", "ftp://x", "http://x/path"} {
		if _, err := blob.NewPresigner(cfg, bad, ""); err == nil {
			t.Errorf("public URL %q accepted", bad)
		}
	}
	p, err := blob.NewPresigner(cfg, "", "")
	if err != nil || p.Origin() != "http://localhost:9000" || p.AccessKey() != "a" {
		t.Fatalf("presigner at the store's own endpoint: %v, %v", p, err)
	}
	u, err := p.PresignGet(context.Background(), "outputs/x/final.mp4", time.Minute, "final.mp4")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.ParseQuery(u.RawQuery)
	if !strings.HasPrefix(q.Get("X-Amz-Credential"), "a/") {
		t.Fatalf("X-Amz-Credential %q, want the signing user", q.Get("X-Amz-Credential"))
	}
}

// TestListAndOpen: List bounds and dates its answer; Open reads from any
// offset.
func TestListAndOpen(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	for _, k := range []string{"uploads/1/source.mp4", "uploads/2/source.mp4", "uploads/3/source.mp4", "videos/1/source.mp4"} {
		if err := s.Put(ctx, k, strings.NewReader("0123456789"), 10, "video/mp4"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.List(ctx, "uploads/", 2)
	if err != nil || len(got) != 2 || got[0].Key != "uploads/1/source.mp4" || got[1].Size != 10 || got[1].Modified.Before(before) {
		t.Fatalf("List(uploads/, 2) = %+v, %v", got, err)
	}
	r, info, err := s.Open(ctx, "uploads/3/source.mp4")
	if err != nil || info.Size != 10 || info.Modified.Before(before) {
		t.Fatalf("Open: %+v, %v", info, err)
	}
	defer r.Close()
	if _, err := r.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(r); err != nil || string(rest) != "789" {
		t.Fatalf("read after a seek: %q, %v", rest, err)
	}
	if _, _, err := s.Open(ctx, "uploads/9/source.mp4"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Open of a missing object: %v, want ErrNotFound", err)
	}
}

// TestExpirePrefixKeepsOtherRules: ExpirePrefix sets its rule, replaces it
// when run again, and leaves the bucket's other rules as they were.
func TestExpirePrefixKeepsOtherRules(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if got, err := s.Expiries(ctx); err != nil || len(got) != 0 {
		t.Fatalf("a new bucket's expiries: %v, %v", got, err)
	}
	if err := s.ExpirePrefix(ctx, "other", "tmp/", 7); err != nil {
		t.Fatal(err)
	}
	for _, days := range []int{3, 1} {
		if err := s.ExpirePrefix(ctx, "uploads", "uploads/", days); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Expiries(ctx)
	want := []blob.Expiry{{ID: "other", Prefix: "tmp/", Days: 7}, {ID: "uploads", Prefix: "uploads/", Days: 1}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("expiries %+v, %v; want %+v", got, err, want)
	}
}
