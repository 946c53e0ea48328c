package speech_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/speech"
)

// writeToneWAV streams a 16 kHz mono WAV of d of tone to a file, with
// silence over the given [from, to) stretches.
func writeToneWAV(t testing.TB, d time.Duration, silences ...[2]time.Duration) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tone.wav")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := int(d * 16000 / time.Second)
	w := bufio.NewWriter(f)
	hdr := wavOf(0)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(36+2*n))
	binary.LittleEndian.PutUint32(hdr[40:], uint32(2*n))
	w.Write(hdr)
	var s [2]byte
	for i := 0; i < n; i++ {
		at := time.Duration(i) * time.Second / 16000
		v := int16(3000 * ((i/20)%2*2 - 1))
		for _, q := range silences {
			if at >= q[0] && at < q[1] {
				v = 0
			}
		}
		binary.LittleEndian.PutUint16(s[:], uint16(v))
		w.Write(s[:])
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

// chunkRecorder answers each chunk with one segment spanning it (its
// length read from the file size, not the samples) and records lengths.
type chunkRecorder struct {
	mu       sync.Mutex
	lengths  []time.Duration
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	fail     error
	lateWord bool // also a word a second before the chunk's end
}

func (c *chunkRecorder) Transcribe(ctx context.Context, path, _ string) ([]speech.Segment, error) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.maxSeen.Load()
		if n <= m || c.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	d := time.Duration(st.Size()-44) * time.Second / 32000
	c.mu.Lock()
	c.lengths = append(c.lengths, d)
	c.mu.Unlock()
	if c.fail != nil {
		return nil, c.fail
	}
	words := []speech.Word{{StartMS: 10, EndMS: 20, Text: "w"}}
	if c.lateWord {
		mid := int(d.Milliseconds()) - 1000
		words = append(words, speech.Word{StartMS: mid, EndMS: mid + 10, Text: "late"})
	}
	return []speech.Segment{{StartMS: 0, EndMS: int(d.Milliseconds()), Text: fmt.Sprint(d), Words: words}}, nil
}

func TestChunkerCutsAtSilence(t *testing.T) {
	// 35 s in chunks of at most 10 s is four even chunks of 8.75 s, each
	// cut searched ±1.75 s around its target; silences at 8.6–8.9 s and
	// 17.5–18.0 s.
	p := writeToneWAV(t, 35*time.Second,
		[2]time.Duration{8600 * time.Millisecond, 8900 * time.Millisecond},
		[2]time.Duration{17500 * time.Millisecond, 18 * time.Second})
	rec := &chunkRecorder{}
	// No lead-in here, so chunks tile the audio (TestChunkerLeadIn has it).
	segs, err := (&speech.Chunker{Engine: rec, ChunkSeconds: 10, Concurrency: 2, LeadSeconds: -1}).Transcribe(context.Background(), p, "en")
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 3 {
		t.Fatalf("%d segments, want one per chunk (at least 3)", len(segs))
	}
	for _, s := range segs {
		t.Logf("chunk [%d, %d] ms", s.StartMS, s.EndMS)
	}
	// Segment i spans chunk i on the whole timeline.
	if c := segs[0].EndMS; c < 8700 || c > 8800 {
		t.Errorf("first cut at %d ms, want the middle of the silence 8600–8900", c)
	}
	if c := segs[1].EndMS; c < 17650 || c > 17850 {
		t.Errorf("second cut at %d ms, want the middle of the silence 17500–18000", c)
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].StartMS != segs[i-1].EndMS {
			t.Errorf("segment %d starts at %d, previous ends at %d: chunks must tile the audio", i, segs[i].StartMS, segs[i-1].EndMS)
		}
		if w := segs[i].Words[0]; w.StartMS != segs[i].StartMS+10 {
			t.Errorf("segment %d: word at %d, want offset %d", i, w.StartMS, segs[i].StartMS+10)
		}
	}
	if last := segs[len(segs)-1].EndMS; last != 35000 {
		t.Errorf("last segment ends at %d ms, want 35000", last)
	}
	if m := rec.maxSeen.Load(); m > 2 {
		t.Errorf("%d chunks at once, want ≤ 2", m)
	}
}

// TestChunkerCutsEvenChunksNearTheirTarget: audio cut only to use the
// cores (44 s at Concurrency 2: two chunks decoded at once) is cut in the
// long pause nearest the middle, not the window's first quietest one, so
// that neither chunk is left decoding alone. Pauses 18.0–18.8 s (at the
// window's edge, 22 s ± 4.4 s) and 21.8–22.4 s.
func TestChunkerCutsEvenChunksNearTheirTarget(t *testing.T) {
	p := writeToneWAV(t, 44*time.Second,
		[2]time.Duration{18 * time.Second, 18800 * time.Millisecond},
		[2]time.Duration{21800 * time.Millisecond, 22400 * time.Millisecond})
	rec := &chunkRecorder{}
	segs, err := (&speech.Chunker{Engine: rec, ChunkSeconds: 60, Concurrency: 2, LeadSeconds: -1}).Transcribe(context.Background(), p, "en")
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 {
		t.Fatalf("%d chunks, want 2", len(segs))
	}
	if c := segs[0].EndMS; c < 21900 || c > 22300 {
		t.Errorf("cut at %d ms, want the middle of the pause 21800–22400 nearest the 22 s target", c)
	}
}

func TestChunkerShortAudioGoesWhole(t *testing.T) {
	p := writeToneWAV(t, 5*time.Second)
	rec := &chunkRecorder{}
	if _, err := (&speech.Chunker{Engine: rec, ChunkSeconds: 10}).Transcribe(context.Background(), p, "en"); err != nil {
		t.Fatal(err)
	}
	if len(rec.lengths) != 1 || rec.lengths[0] != 5*time.Second {
		t.Errorf("chunks %v, want the whole 5 s file", rec.lengths)
	}
}

func TestChunkerPropagatesErrorsAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	p := writeToneWAV(t, 40*time.Second)
	boom := fault.Permanent(errors.New("bad audio"))
	_, err := (&speech.Chunker{Engine: &chunkRecorder{fail: boom}, ChunkSeconds: 5, TempDir: dir}).Transcribe(context.Background(), p, "en")
	if !errors.Is(err, boom) || !fault.IsPermanent(err) {
		t.Fatalf("want the engine's permanent error, got %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d chunk files left behind", len(left))
	}
}

func TestChunkerRejectsStereo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stereo.wav")
	b := wavOf(time.Second)
	binary.LittleEndian.PutUint16(b[22:], 2)
	os.WriteFile(p, b, 0o644)
	_, err := (&speech.Chunker{Engine: &chunkRecorder{}}).Transcribe(context.Background(), p, "en")
	if !fault.IsPermanent(err) || !errors.Is(err, speech.ErrNotWAV) {
		t.Fatalf("want a permanent ErrNotWAV, got %v", err)
	}
}

func TestChunkerStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 10-minute WAV; skipped with -short (make test runs it)")
	}
	// 10 minutes is 19.2 MB of samples; 30 s chunks need about 1.2 MB.
	p := writeToneWAV(t, 10*time.Minute)
	c := &speech.Chunker{Engine: &chunkRecorder{lateWord: true}, ChunkSeconds: 30, Concurrency: 2, TempDir: t.TempDir()}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	segs, err := c.Transcribe(context.Background(), p, "en")
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 19 {
		t.Fatalf("%d chunks, want about 20", len(segs))
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes for a %d-byte file", alloc, 2*16000*600)
	if alloc > 4<<20 {
		t.Errorf("allocated %d bytes: the file was not streamed", alloc)
	}
}

// TestChunkerCutsDoNotDrift: each cut aims at its place on the whole
// timeline (k × 60 s), not 60 s after the previous cut. Pauses every 70 s
// lie inside the window after each previous cut, so cuts aimed from the
// previous one would follow them, and 10 minutes would end in 9 chunks of
// up to 70 s (one alone on a core while the other idles) instead of 10.
func TestChunkerCutsDoNotDrift(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes a 10-minute WAV; skipped with -short (make test runs it)")
	}
	var pauses [][2]time.Duration
	for at := 70 * time.Second; at < 10*time.Minute; at += 70 * time.Second {
		pauses = append(pauses, [2]time.Duration{at, at + 300*time.Millisecond})
	}
	p := writeToneWAV(t, 10*time.Minute, pauses...)
	c := &speech.Chunker{ChunkSeconds: 60, Concurrency: 2, TempDir: t.TempDir()}
	var starts []time.Duration
	err := c.Split(context.Background(), p, func(ch speech.Chunk) error {
		starts = append(starts, time.Duration(ch.OffsetMS+ch.LeadMS)*time.Millisecond)
		return os.Remove(ch.Path)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The first minute and a quarter in two chunks of 37.5 s (as many as
	// are decoded at once: the start is transcribed first), then chunks
	// ending on the whole minutes from the second, then the last two
	// minutes (the last two chunks) in four of 30 s, so that the last to
	// start end closer together.
	want := []time.Duration{0, 37500 * time.Millisecond, 75 * time.Second}
	for k := 2; k < 8; k++ {
		want = append(want, time.Duration(k)*time.Minute)
	}
	want = append(want, 8*time.Minute, 8*time.Minute+30*time.Second, 9*time.Minute, 9*time.Minute+30*time.Second)
	if len(starts) != len(want) {
		t.Fatalf("chunks start at %v: %d chunks, want %d starting near %v", starts, len(starts), len(want), want)
	}
	for k, at := range starts {
		window := 12 * time.Second // a fifth of the chunk the cut ends
		switch {
		case k == 1 || k == 2:
			window = 7500 * time.Millisecond
		case k > 9:
			window = 6 * time.Second
		}
		if d := at - want[k]; d < -window || d > window {
			t.Errorf("chunk %d starts at %v, more than a window (%v) from %v", k, at, window, want[k])
		}
	}
}

func TestChunkerLeadIn(t *testing.T) {
	// 35 s in 10 s chunks is four even ones of 8.75 s: silences at the
	// first two cuts (8.6–8.9 s, 17.3–17.7 s); 3 s lead-in.
	p := writeToneWAV(t, 35*time.Second,
		[2]time.Duration{8600 * time.Millisecond, 8900 * time.Millisecond},
		[2]time.Duration{17300 * time.Millisecond, 17700 * time.Millisecond})
	rec := &chunkRecorder{lateWord: true}
	segs, err := (&speech.Chunker{Engine: rec, ChunkSeconds: 10, Concurrency: 1, LeadSeconds: 3}).Transcribe(context.Background(), p, "en")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.lengths) < 3 || rec.lengths[1] < 11*time.Second {
		t.Fatalf("chunk lengths %v: chunks after the first must carry a 3 s lead-in", rec.lengths)
	}
	// The first chunk keeps both its words; later chunks lose the word the
	// engine heard in their lead-in (10 ms into the file), which belongs to
	// the chunk before.
	if len(segs[0].Words) != 2 {
		t.Fatalf("first chunk kept %d words, want 2", len(segs[0].Words))
	}
	for i, s := range segs[1:] {
		if len(s.Words) != 1 || s.Words[0].Text != "late" {
			t.Fatalf("chunk %d kept %+v, want only the late word", i+1, s.Words)
		}
		if s.StartMS != s.Words[0].StartMS || s.Text != "late" {
			t.Errorf("chunk %d: segment starts at %d with text %q, want its first kept word's start and text", i+1, s.StartMS, s.Text)
		}
		if s.StartMS < segs[i].Words[len(segs[i].Words)-1].StartMS {
			t.Errorf("chunk %d's words go back in time", i+1)
		}
	}
	if last := segs[len(segs)-1].EndMS; last != 35000 {
		t.Errorf("last segment ends at %d ms, want 35000", last)
	}
}
