package blob_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/fault"
)

// A store that cannot be reached is an outage (fault.Unavailable: the step
// waits for it without spending retries); a missing object is an answer
// about the object, not an outage.
func TestUnreachableStoreIsUnavailableAMissingObjectIsNot(t *testing.T) {
	t.Parallel()
	down := downStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := down.Stat(ctx, "videos/x/source.mp4")
	if !fault.IsUnavailable(err) {
		t.Errorf("stat on a store that is down: %v, want it marked unavailable", err)
	}
	err = down.GetFile(ctx, "videos/x/source.mp4", filepath.Join(t.TempDir(), "f"), 0)
	if !fault.IsUnavailable(err) {
		t.Errorf("download from a store that is down: %v, want it marked unavailable", err)
	}

	up := newStore(t) // may start a container: its own timeout starts after
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = up.Stat(ctx, "videos/no/such.mp4")
	if !errors.Is(err, blob.ErrNotFound) || fault.IsUnavailable(err) {
		t.Errorf("missing object: %v, want ErrNotFound and not unavailable", err)
	}
}

// downStore is a store at an address nothing listens on.
func downStore(t *testing.T) *blob.Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	down, err := blob.New(config.S3{Endpoint: addr, AccessKey: "k", SecretKey: "secret123", Bucket: "dubflow"})
	if err != nil {
		t.Fatal(err)
	}
	return down
}
