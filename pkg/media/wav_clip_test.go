package media

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWriteWAVClip: the clip holds exactly the frames of its span, with a
// header of its own, and a span past the end is cut to it.
func TestWriteWAVClip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ramp.wav")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWAVWriter(f, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	ramp := make([]int16, 3000) // 3 s at 1 kHz: sample i is i
	for i := range ramp {
		ramp[i] = int16(i)
	}
	if err := w.WriteSamples(ramp); err != nil || w.Close() != nil || f.Close() != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to    time.Duration
		first, n    int
		wantRefusal bool
	}{
		{time.Second, 1500 * time.Millisecond, 1000, 500, false},
		{2500 * time.Millisecond, 9 * time.Second, 2500, 500, false},
		{3 * time.Second, 4 * time.Second, 0, 0, true},
	} {
		src, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = WriteWAVClip(&out, src, c.from, c.to)
		src.Close()
		if c.wantRefusal {
			if err == nil {
				t.Errorf("clip %s–%s: no error, want a refusal", c.from, c.to)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewWAVReader(&out)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int16, 4000)
		n, err := r.ReadSamples(got)
		if (err != nil && err != io.EOF) || n != c.n || r.Frames != int64(c.n) || got[0] != int16(c.first) || got[n-1] != int16(c.first+c.n-1) {
			t.Errorf("clip %s–%s: %d samples from %d (frames %d, %v); want %d from %d", c.from, c.to, n, got[0], r.Frames, err, c.n, c.first)
		}
	}
}
