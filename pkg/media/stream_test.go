package media

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStreamSegmentsPlaceTheBatchOnTheTimeline: a batch of 10..23 s of a
// video is cut into pieces of six seconds (6, 6, 1), the first decoding at
// 10 s — the batch's place on the timeline — and two batches of one source
// share their init segment byte for byte, so that a player appends both to
// one buffer.
func TestStreamSegmentsPlaceTheBatchOnTheTimeline(t *testing.T) {
	t.Parallel()
	requireTools(t)
	ctx := context.Background()
	dir := t.TempDir()
	video := filepath.Join(dir, "src.mp4")
	if out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
		"-f", "lavfi", "-i", "sine=f=300:d=30", "-t", "30", "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-g", "250",
		"-pix_fmt", "yuv420p", "-c:a", "aac", video).CombinedOutput(); err != nil {
		t.Fatalf("make video: %v\n%s", err, out)
	}
	batch := func(from, to int) *StreamBatch {
		t.Helper()
		d := filepath.Join(dir, strconv.Itoa(from))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dub := filepath.Join(d, "dub.wav")
		if out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "sine=f=800:d="+msSeconds(to-from),
			"-ar", "48000", "-ac", "1", dub).CombinedOutput(); err != nil {
			t.Fatalf("make dub: %v\n%s", err, out)
		}
		b, err := StreamSegments(ctx, StreamInput{Video: video, Dub: dub, FromMS: from, ToMS: to, Dir: d})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first, second := batch(0, 10000), batch(10000, 23000)
	var lens []int
	total := 0
	for _, p := range second.Pieces {
		lens = append(lens, p.DurationMS)
		total += p.DurationMS
	}
	if len(lens) != 3 || lens[0] != 6000 || lens[1] != 6000 || total < 12900 || total > 13100 {
		t.Fatalf("pieces %v ms, want 6000, 6000 and the rest of 13 s", lens)
	}
	a, err := os.ReadFile(first.Init)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(second.Init)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("the two batches' init segments differ (%d and %d bytes)", len(a), len(b))
	}
	piece, err := os.ReadFile(second.Pieces[0].File)
	if err != nil {
		t.Fatal(err)
	}
	// The video track's first decode time, in its time scale (the
	// first tfdt), over the scale read back from ffprobe.
	decode := firstDecodeTime(t, piece)
	scale := timeScale(t, first.Init)
	if got := float64(decode) / float64(scale); got < 9.99 || got > 10.01 {
		t.Errorf("the second batch's first piece decodes at %.3f s, want 10", got)
	}
}

// firstDecodeTime is the base media decode time of the first track
// fragment in an fMP4 piece.
func firstDecodeTime(t *testing.T, b []byte) uint64 {
	t.Helper()
	i := strings.Index(string(b), "tfdt")
	if i < 0 || i+16 > len(b) {
		t.Fatal("no tfdt box in the piece")
	}
	if b[i+4] == 1 {
		return binary.BigEndian.Uint64(b[i+8 : i+16])
	}
	return uint64(binary.BigEndian.Uint32(b[i+8 : i+12]))
}

// timeScale is the video track's time scale in an init segment.
func timeScale(t *testing.T, init string) int {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=time_base",
		"-of", "csv=p=0", init).Output()
	if err != nil {
		t.Fatal(err)
	}
	_, den, ok := strings.Cut(strings.TrimSpace(string(out)), "/")
	n, err := strconv.Atoi(den)
	if !ok || err != nil || n <= 0 {
		t.Fatalf("time base %q", out)
	}
	return n
}
