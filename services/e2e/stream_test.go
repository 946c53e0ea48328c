package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/stream"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
)

// TestStreamGrowsWhileTheTaskRuns: a 100 s video cut into 20 s chunks gains
// a growing HLS stream (issue 53): part of it is playable while the task
// still runs; when the task is done the stored playlist has ended, its
// batches follow one another from 0 to the video's end without a gap, and
// what the stream plays is the dub (it sounds like final.mp4's dub track
// over the same stretch far more than like the original soundtrack). A
// re-dubbed line re-makes the batch it is in, in a new playlist version.
func TestStreamGrowsWhileTheTaskRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStack(t, map[string]string{"ASR_CHUNK_SECONDS": "20", "ASR_CONCURRENCY": "1"})
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	video := fixtureVideo(t, ctx, "two_cities.wav", 100*time.Second)
	id := s.submit(t, ctx, video)

	// Before the task is done, some of the stream plays.
	var early int
	testenv.EventuallyWithin(t, 10*time.Minute, "the stream of "+id.String()+" to grow, or the task to end", func() bool {
		var status string
		var made *int
		err := s.db.Pool.QueryRow(ctx, `SELECT t.status, st.made_until_ms FROM tasks t
			LEFT JOIN task_streams st ON st.task_id = t.id WHERE t.id = $1`, id).Scan(&status, &made)
		if err != nil {
			return false
		}
		if made != nil && *made > 0 && status != "done" {
			early = *made
			return true
		}
		return status == "done" || status == "failed"
	})
	if early == 0 {
		t.Fatal("the task ended before any of its stream was playable")
	}
	// dubctl wait says where the stream is as soon as it has one.
	_, stderr, code := s.dubctl(t, ctx, "wait", id.String(), "--timeout", "10m", "--output", filepath.Join(t.TempDir(), "out.mp4"))
	if code != 0 || !strings.Contains(stderr, "stream: http") || !strings.Contains(stderr, "/stream/"+stream.MasterName+" (") {
		t.Errorf("dubctl wait: exit %d, stderr:\n%s", code, stderr)
	}
	v, code := s.waitTask(t, ctx, id, "", 10*time.Minute)
	if code != 0 || v.Status != "done" {
		t.Fatalf("task %s: exit %d, %s: %s", id, code, v.Status, v.Error)
	}
	st := s.waitStreamEnded(t, ctx, id)
	t.Logf("playable before the task was done: %.1f s; batches: %d", float64(early)/1000, len(st.Batches))
	checkBatches(t, st, 100_000)
	checkStreamCopiesTheVideo(t, ctx, st, video, 100_000)

	keys := wire.DefaultKeys(id)
	dir := stream.Dir(keys.OutputVideo)
	playlist := string(s.object(t, ctx, dir+stream.VideoName))
	if !strings.HasPrefix(playlist, "#EXTM3U") || !strings.Contains(playlist, "#EXT-X-PLAYLIST-TYPE:EVENT") ||
		!strings.HasSuffix(playlist, "#EXT-X-ENDLIST\n") {
		t.Errorf("stored playlist is not an ended EVENT playlist:\n%s", playlist)
	}
	master := string(s.object(t, ctx, dir+stream.MasterName))
	if !strings.Contains(master, "CODECS=\"avc1.") || !strings.Contains(master, stream.SubtitlesName) {
		t.Errorf("stored multivariant playlist:\n%s", master)
	}
	s.checkStreamIsTheDub(t, ctx, st, video, keys.OutputVideo)
	s.checkRedubRestreams(t, ctx, id, st)
}

// checkStreamCopiesTheVideo: the fixture's video (H.264 High, 4:2:0, a key
// frame at least every 5 s) is copied into the stream, never re-encoded:
// the stream names the source's own profile (an encode would be x264
// ultrafast's Constrained Baseline), and every batch starts and ends on
// one of the source's key frames.
func checkStreamCopiesTheVideo(t *testing.T, ctx context.Context, st *stream.State, video string, totalMS int) {
	t.Helper()
	plan, err := media.PlanStreamVideo(ctx, video, totalMS)
	if err != nil || !plan.Copy {
		t.Fatalf("the fixture's stream plan: %+v, %v; want it copied", plan, err)
	}
	keys := map[int]bool{}
	for _, k := range plan.Keys {
		keys[k.MS()] = true
	}
	for _, b := range st.Batches {
		if !keys[b.FromMS] || (b.ToMS < totalMS && !keys[b.ToMS]) {
			t.Errorf("batch %d..%d ms does not start and end on key frames of the source", b.FromMS, b.ToMS)
		}
	}
	if !strings.HasPrefix(st.Init.Codecs, "avc1.64") {
		t.Errorf("the stream's codecs %q, want the source's High profile (avc1.64…): copied", st.Init.Codecs)
	}
}

// checkRedubRestreams re-dubs a line of the second batch: that batch
// alone is made again (its pieces named v2-…), the multivariant
// playlist names the playlists of version 2, which list the new pieces,
// and the playlist of version 1 still lists the old ones.
func (s *stack) checkRedubRestreams(t *testing.T, ctx context.Context, id uuid.UUID, before *stream.State) {
	t.Helper()
	b := before.Batches[1]
	var n int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM segments WHERE task_id = $1 AND start_ms < $2`, id, b.FromMS).Scan(&n); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := s.dubctl(t, ctx, "redub", id.String(), "--segment", strconv.Itoa(n+1),
		"--text", "Una línea nueva en medio del flujo.", "--wait", "--json", "--timeout", "5m")
	if code != 0 {
		t.Fatalf("redub: exit %d: %s", code, stderr)
	}
	after, err := stream.Load(ctx, s.db.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != 2 || len(after.Batches) != len(before.Batches) {
		t.Fatalf("after the re-dub the stream shows version %d with %d batches (before: %d)", after.Version, len(after.Batches), len(before.Batches))
	}
	dir := stream.Dir(wire.DefaultKeys(id).OutputVideo)
	for i, nb := range after.Batches {
		changed := nb.Pieces[0].Key != before.Batches[i].Pieces[0].Key
		if changed != (i == 1) {
			t.Errorf("batch %d..%d ms: re-made %v", nb.FromMS, nb.ToMS, changed)
		}
		if i == 1 && !strings.HasPrefix(nb.Pieces[0].Key, dir+"v2-") {
			t.Errorf("re-made piece %s, want it named %sv2-…", nb.Pieces[0].Key, dir)
		}
	}
	master := string(s.object(t, ctx, dir+stream.MasterName))
	v2 := string(s.object(t, ctx, dir+"video-v2.m3u8"))
	v1 := string(s.object(t, ctx, dir+stream.VideoName))
	if !strings.Contains(master, "video-v2.m3u8") || !strings.Contains(v2, "\nv2-b") || strings.Contains(v1, "\nv2-b") ||
		!strings.HasSuffix(v2, "#EXT-X-ENDLIST\n") {
		t.Errorf("after the re-dub:\nmaster:\n%s\nversion 2:\n%s\nversion 1:\n%s", master, v2, v1)
	}
}

// waitStreamEnded waits until the task's stream has ended and returns it.
func (s *stack) waitStreamEnded(t *testing.T, ctx context.Context, id uuid.UUID) *stream.State {
	t.Helper()
	var st *stream.State
	testenv.EventuallyWithin(t, 2*time.Minute, "the stream of "+id.String()+" to end", func() bool {
		var err error
		st, err = stream.Load(ctx, s.db.Pool, id)
		return err == nil && st.Ended
	})
	if st.LastError != "" {
		t.Errorf("the stream recorded a failure: %s", st.LastError)
	}
	return st
}

// checkBatches: the batches run from 0 to totalMS (±0.5 s) each where the
// one before ended, and their pieces last as long as they do.
func checkBatches(t *testing.T, st *stream.State, totalMS int) {
	t.Helper()
	at := 0
	for _, b := range st.Batches {
		if b.FromMS != at {
			t.Errorf("batch %d..%d ms follows one that ended at %d ms", b.FromMS, b.ToMS, at)
		}
		sum := 0
		for _, p := range b.Pieces {
			sum += p.DurationMS
		}
		if d := sum - (b.ToMS - b.FromMS); d < -150 || d > 150 {
			t.Errorf("batch %d..%d ms: its pieces last %d ms", b.FromMS, b.ToMS, sum)
		}
		at = b.ToMS
	}
	if at < totalMS-500 || at > totalMS+500 || st.MadeUntilMS != at {
		t.Errorf("the stream ends at %d ms (made until %d), want the video's %d", at, st.MadeUntilMS, totalMS)
	}
}

// object reads one object of the test's bucket.
func (s *stack) object(t *testing.T, ctx context.Context, key string) []byte {
	t.Helper()
	obj, err := s.bucket.Client.GetObject(ctx, s.bucket.Name, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return b
}

// checkStreamIsTheDub decodes each of the stream's batches and compares
// its sound with final.mp4's dub track and with the original soundtrack
// over the same stretch.
func (s *stack) checkStreamIsTheDub(t *testing.T, ctx context.Context, st *stream.State, source, outputKey string) {
	t.Helper()
	if len(st.Batches) < 2 {
		t.Fatalf("the stream has %d batches, want at least 2", len(st.Batches))
	}
	dir := t.TempDir()
	final := filepath.Join(dir, "final.mp4")
	if err := os.WriteFile(final, s.object(t, ctx, outputKey), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every batch but the last (the fixture speaks throughout): a line
	// begun before a batch's start (a copied video's batches end on key
	// frames) plays in it too.
	for i, b := range st.Batches[:len(st.Batches)-1] {
		var joined bytes.Buffer
		joined.Write(s.object(t, ctx, b.MapKey))
		for _, p := range b.Pieces {
			joined.Write(s.object(t, ctx, p.Key))
		}
		streamed := filepath.Join(dir, fmt.Sprintf("batch-%d.mp4", i))
		if err := os.WriteFile(streamed, joined.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		from, length := float64(b.FromMS)/1000+0.5, float64(b.ToMS-b.FromMS)/1000-1
		got := pcm(t, streamed, "0:a:0", 0.5, length, true)
		dub := pcm(t, final, "0:a:0", from, length, false)
		orig := pcm(t, source, "0:a:0", from, length, false)
		withDub, withOrig := correlation(got, dub), correlation(got, orig)
		t.Logf("batch %d..%d ms: correlation with the dub %.2f, with the original %.2f", b.FromMS, b.ToMS, withDub, withOrig)
		if withDub < 0.6 || withDub < withOrig+0.2 {
			t.Errorf("batch %d..%d ms: the stream's sound correlates %.2f with the dub and %.2f with the original soundtrack",
				b.FromMS, b.ToMS, withDub, withOrig)
		}
	}
}

// pcm decodes length seconds of a file's audio from from to 8 kHz mono
// samples; whole, a file that is one batch of the stream (a fragmented MP4
// without an index, which ffmpeg cannot seek in), skipping the seconds
// skip from its start.
func pcm(t *testing.T, file, stream string, from, length float64, whole bool) []float64 {
	t.Helper()
	args := []string{"-nostdin", "-v", "error"}
	if !whole {
		args = append(args, "-ss", ftoa(from), "-t", ftoa(length))
	}
	args = append(args, "-i", file, "-map", stream, "-ac", "1", "-ar", "8000", "-f", "s16le", "-")
	out, err := exec.Command("ffmpeg", args...).Output()
	if err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	if whole {
		first, last := int(from*8000)*2, int((from+length)*8000)*2
		if last > len(out) {
			t.Fatalf("decode %s: %d samples, want %d", file, len(out)/2, last/2)
		}
		out = out[first:last]
	}
	n := len(out) / 2
	if n < 4000 {
		t.Fatalf("decode %s from %.1f s: %d samples", file, from, n)
	}
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(int16(binary.LittleEndian.Uint16(out[2*i:])))
	}
	return x
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }

// correlation is the largest normalised cross-correlation of a and b over
// shifts of up to ±50 ms (an encoder's delay), of their envelopes (20 ms
// RMS frames): a voice mixed the same way matches, another sound does not.
func correlation(a, b []float64) float64 {
	ea, eb := envelope(a), envelope(b)
	best := -1.0
	for shift := -3; shift <= 3; shift++ {
		var sab, saa, sbb, ma, mb float64
		n := 0
		for i := range ea {
			j := i + shift
			if j < 0 || j >= len(eb) {
				continue
			}
			ma += ea[i]
			mb += eb[j]
			n++
		}
		if n == 0 {
			continue
		}
		ma, mb = ma/float64(n), mb/float64(n)
		for i := range ea {
			j := i + shift
			if j < 0 || j >= len(eb) {
				continue
			}
			x, y := ea[i]-ma, eb[j]-mb
			sab, saa, sbb = sab+x*y, saa+x*x, sbb+y*y
		}
		if saa > 0 && sbb > 0 {
			best = math.Max(best, sab/math.Sqrt(saa*sbb))
		}
	}
	return best
}

// envelope is the RMS of each 20 ms frame of 8 kHz samples.
func envelope(x []float64) []float64 {
	const frame = 160
	out := make([]float64, 0, len(x)/frame)
	for i := 0; i+frame <= len(x); i += frame {
		var sum float64
		for _, v := range x[i : i+frame] {
			sum += v * v
		}
		out = append(out, math.Sqrt(sum/frame))
	}
	return out
}
