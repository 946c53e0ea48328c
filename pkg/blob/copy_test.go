package blob_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestCopyPlacesAnObjectOfOneTaskUnderAnother copies a video from one
// task's key to another's server-side, twice (a repeated copy is harmless);
// refuses hostile or foreign keys permanently without copying anything;
// reports a missing source as a permanent ErrNotFound and a store that is
// down as an outage.
func TestCopyPlacesAnObjectOfOneTaskUnderAnother(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	parent, child := uuid.New(), uuid.New()
	src := blob.Ref{Task: parent, Key: wire.DefaultKeys(parent).SourceVideo}
	dst := blob.Ref{Task: child, Key: wire.DefaultKeys(child).SourceVideo}
	data := bytes.Repeat([]byte("video"), 40<<10)
	if err := s.Put(ctx, src.Key, bytes.NewReader(data), int64(len(data)), "video/mp4"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Copy(ctx, wire.KindVideo, src, dst); err != nil {
			t.Fatalf("copy: %v", err)
		}
	}
	got, err := s.Get(ctx, dst.Key, int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copied object: %d bytes (%v), want the %d of the source", len(got), err, len(data))
	}
	if info, err := s.Stat(ctx, dst.Key); err != nil || info.ContentType != "video/mp4" {
		t.Errorf("copy's stat %+v (%v), want the source's content type", info, err)
	}

	other := uuid.New()
	for _, c := range []struct {
		name     string
		src, dst blob.Ref
	}{
		{"source climbs out", blob.Ref{parent, "videos/" + parent.String() + "/../" + other.String() + "/source.mp4"}, dst},
		{"destination climbs out", src, blob.Ref{child, "videos/" + child.String() + "/../" + other.String() + "/source.mp4"}},
		{"source of another task", blob.Ref{parent, wire.DefaultKeys(other).SourceVideo}, dst},
		{"destination of another task", src, blob.Ref{child, wire.DefaultKeys(other).SourceVideo}},
		{"destination of another kind", src, blob.Ref{child, wire.DefaultKeys(child).OutputVideo}},
		{"absolute destination", src, blob.Ref{child, "/videos/" + child.String() + "/source.mp4"}},
		{"control character", src, blob.Ref{child, "videos/" + child.String() + "/a\nb.mp4"}},
		{"empty destination", src, blob.Ref{child, ""}},
	} {
		err := s.Copy(ctx, wire.KindVideo, c.src, c.dst)
		var invalid *wire.InvalidError
		if !fault.IsPermanent(err) || !errors.As(err, &invalid) {
			t.Errorf("%s: %v, want a permanent invalid key", c.name, err)
		}
	}
	if _, err := s.Stat(ctx, wire.DefaultKeys(other).SourceVideo); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("a refused copy left an object of task %s: %v", other, err)
	}

	missing := blob.Ref{Task: other, Key: wire.DefaultKeys(other).SourceVideo}
	err = s.Copy(ctx, wire.KindVideo, missing, dst)
	if !errors.Is(err, blob.ErrNotFound) || !fault.IsPermanent(err) || fault.IsUnavailable(err) {
		t.Errorf("copy of a missing object: %v, want a permanent ErrNotFound", err)
	}

	down := downStore(t)
	if err := down.Copy(ctx, wire.KindVideo, src, dst); !fault.IsUnavailable(err) {
		t.Errorf("copy on a store that is down: %v, want it marked unavailable", err)
	}
}
