package media

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestStreamCopiesAVideoItCanCutOnKeyFrames: an H.264 source with a key
// frame every two seconds and B-frames is copied, never re-encoded; its
// batches end on key frames (Cut), and the three batches' pieces played
// one after another show every frame of the source exactly once, in order,
// each at its own time plus the plan's offset (its reorder delay), with
// the stereo sound beside them to the end. A source with key frames ten
// seconds apart is re-encoded, and says why.
func TestStreamCopiesAVideoItCanCutOnKeyFrames(t *testing.T) {
	t.Parallel()
	requireTools(t)
	ctx := context.Background()
	dir := t.TempDir()
	source := func(name, gop string) string {
		p := filepath.Join(dir, name)
		if out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
			"-f", "lavfi", "-i", "sine=f=300:d=21", "-t", "21", "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-g", gop,
			"-bf", "2", "-pix_fmt", "yuv420p", "-c:a", "aac", p).CombinedOutput(); err != nil {
			t.Fatalf("make video: %v\n%s", err, out)
		}
		return p
	}
	if plan, err := PlanStreamVideo(ctx, source("long.mp4", "250"), 21000); err != nil || plan.Copy || !strings.Contains(plan.Why, "10.0 s apart") {
		t.Fatalf("a 10 s group: plan %+v, %v; want re-encoded, the reason named", plan, err)
	}
	video := source("src.mp4", "50")
	plan, err := PlanStreamVideo(ctx, video, 21000)
	if err != nil || !plan.Copy || len(plan.Keys) != 11 || plan.OffsetUS <= 0 {
		t.Fatalf("plan %+v, %v; want copied, 11 key frames, an offset", plan, err)
	}
	// Lines end the batches at 7.5 s and 15.9 s: cut back to key frames.
	cuts := []int{0, plan.Cut(0, 7500), plan.Cut(6000, 15900), 21000}
	if cuts[1] != 6000 || cuts[2] != 14000 || plan.Cut(6000, 7999) != 6000 {
		t.Fatalf("cuts %v (and %d), want 6000, 14000 (and none before 8000)", cuts, plan.Cut(6000, 7999))
	}
	dub := filepath.Join(dir, "dub.wav")
	if out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "sine=f=800:d=22",
		"-ar", "48000", "-ac", "1", dub).CombinedOutput(); err != nil {
		t.Fatalf("make dub: %v\n%s", err, out)
	}
	var whole []byte
	var inits []string
	for i := range 3 {
		d := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := StreamSegments(ctx, StreamInput{Video: video, Plan: plan, Dub: dub, DubFromMS: cuts[i], FromMS: cuts[i],
			ToMS: cuts[i+1], Channels: 2, Last: i == 2, Dir: d})
		if err != nil {
			t.Fatal(err)
		}
		init, err := os.ReadFile(b.Init)
		if err != nil {
			t.Fatal(err)
		}
		inits = append(inits, string(init))
		if i == 0 {
			whole = append(whole, init...)
		}
		for _, p := range b.Pieces {
			if p.DurationMS > StreamPieceSeconds*1000 {
				t.Errorf("batch %d: a piece of %d ms", i, p.DurationMS)
			}
			piece, err := os.ReadFile(p.File)
			if err != nil {
				t.Fatal(err)
			}
			whole = append(whole, piece...)
		}
	}
	if inits[0] != inits[1] || inits[1] != inits[2] {
		t.Error("the batches' init segments differ")
	}
	played := filepath.Join(dir, "played.mp4")
	if err := os.WriteFile(played, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	checkFrames(t, played, 21*25, plan.OffsetUS)
	if out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries", "stream=channels",
		"-of", "csv=p=0", played).Output(); err != nil || strings.TrimSpace(string(out)) != "2" {
		t.Errorf("the stream's sound has %q channels (%v), want the stereo dub's 2", out, err)
	}
}

// checkFrames reads the video frames' times of a played stream: n frames
// 40 ms apart from offsetUS, and sound to its end.
func checkFrames(t *testing.T, played string, n int, offsetUS int64) {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time",
		"-of", "csv=p=0", played).Output()
	if err != nil {
		t.Fatal(err)
	}
	var pts []float64
	for _, l := range strings.Fields(string(out)) {
		v, err := strconv.ParseFloat(l, 64)
		if err != nil {
			t.Fatalf("pts %q", l)
		}
		pts = append(pts, v)
	}
	slices.Sort(pts)
	if len(pts) != n {
		t.Fatalf("%d video frames, want %d", len(pts), n)
	}
	for i, v := range pts {
		if want := float64(offsetUS)/1e6 + float64(i)*0.04; math.Abs(v-want) > 0.002 {
			t.Fatalf("frame %d shows at %.3f s, want %.3f", i, v, want)
		}
	}
	out, err = exec.Command("ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries", "packet=pts_time",
		"-of", "csv=p=0", played).Output()
	if err != nil {
		t.Fatal(err)
	}
	audio := strings.Fields(string(out))
	last, _ := strconv.ParseFloat(audio[len(audio)-1], 64)
	if len(audio) == 0 || last < 20.9 {
		t.Fatalf("the sound ends at %.3f s, want 21", last)
	}
}
