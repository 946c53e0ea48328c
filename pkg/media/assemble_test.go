package media

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// makeTone writes a 1 kHz mono tone of ms milliseconds at 22.05 kHz, the
// rate espeak-ng produces.
func makeTone(t testing.TB, path string, ms int) {
	t.Helper()
	requireTools(t)
	src := fmt.Sprintf("sine=frequency=1000:sample_rate=22050:duration=%.3f", float64(ms)/1000)
	out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", src, "-c:a", "pcm_s16le", "-y", path).CombinedOutput()
	if err != nil {
		t.Fatalf("make tone: %v: %s", err, out)
	}
}

// loudness returns, per 10 ms window of a mono WAV, whether it holds sound.
func loudness(t *testing.T, path string) []bool {
	t.Helper()
	r := readWAV(t, path)
	window := r.Format.SampleRate / 100 * r.Format.Channels
	samples := readAll(t, r, 4096)
	var out []bool
	for i := 0; i+window <= len(samples); i += window {
		peak := 0
		for _, s := range samples[i : i+window] {
			peak = max(peak, abs(int(s)))
		}
		out = append(out, peak > 1000)
	}
	return out
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestAssembleDub places clips that are padded, stretched, borrowing, over
// the bound and truncated, without a soundtrack, and checks the voice is
// exactly where the placements say.
func TestAssembleDub(t *testing.T) {
	dir := t.TempDir()
	slots := []Slot{
		{Idx: 0, StartMS: 500, EndMS: 2500, NextStartMS: 3000, AudioMS: 1000},    // padded
		{Idx: 1, StartMS: 3000, EndMS: 5000, NextStartMS: 6000, AudioMS: 2500},   // stretched 1.25x
		{Idx: 2, StartMS: 6000, EndMS: 7000, NextStartMS: 8000, AudioMS: 1700},   // 1.3x, borrows
		{Idx: 3, StartMS: 8000, EndMS: 9000, NextStartMS: 9500, AudioMS: 2100},   // 1.4x, over the bound
		{Idx: 4, StartMS: 9500, EndMS: 10000, NextStartMS: 10500, AudioMS: 3000}, // truncated
		{Idx: 5, StartMS: 11000, EndMS: 11800, AudioMS: 1500},                    // runs past the timeline: cut at its end
	}
	const totalMS = 12000
	for _, s := range slots {
		makeTone(t, filepath.Join(dir, fmt.Sprintf("clip %d.wav", s.Idx)), s.AudioMS)
	}
	placements := Fit(slots, FitOptions{TotalMS: totalMS})
	wantNotes := []string{NotePadded, NoteSpedUp, NoteBorrowed, NoteOverBound, NoteTruncated, NoteOverBound}
	for i, p := range placements {
		if p.Note != wantNotes[i] {
			t.Errorf("segment %d: note %s, want %s (%+v)", i, p.Note, wantNotes[i], p)
		}
	}
	out := filepath.Join(dir, "dub.wav")
	clip := func(idx int) string { return filepath.Join(dir, fmt.Sprintf("clip %d.wav", idx)) }
	rep, err := AssembleDub(context.Background(), DubInput{Placements: placements, Clip: clip, TotalMS: totalMS}, out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Background != BackgroundNone || rep.Stretched != 5 || rep.Channels != 1 {
		t.Errorf("mix report %+v", rep)
	}
	r := readWAV(t, out)
	if r.Format != (WAVFormat{SampleRate: mixRate, Channels: 1, BitsPerSample: 16}) {
		t.Errorf("format %+v", r.Format)
	}
	if want := int64(totalMS * mixRate / 1000); r.Frames != want {
		t.Errorf("dub track has %d frames, want %d (%d ms)", r.Frames, want, totalMS)
	}
	wantSoundWhere(t, loudness(t, out), placements, totalMS)
	wantOnsets(t, out, placements)
}

// wantOnsets measures where each clip's sound starts in the track: within
// 0.1 s of the source line's start (to the sample: the first sample above
// -30 dBFS), stretched or not.
func wantOnsets(t *testing.T, track string, placements []Placement) {
	t.Helper()
	r := readWAV(t, track)
	rate := r.Format.SampleRate
	samples := readAll(t, r, 1<<16)
	prevEnd := 0
	for _, p := range placements {
		from := max(p.StartMS-100, prevEnd) * rate / 1000
		prevEnd = p.EndMS()
		onset := -1
		for i := from; i < min(len(samples), (p.StartMS+300)*rate/1000); i++ {
			if abs(int(samples[i])) > 1000 {
				onset = i
				break
			}
		}
		drift := float64(onset)*1000/float64(rate) - float64(p.StartMS)
		t.Logf("segment %d (%s, tempo %v): report start drift %d ms, measured %.1f ms", p.Idx, p.Note, p.Tempo, p.StartDriftMS, drift)
		if onset < 0 || drift > 100 || drift < -100 {
			t.Errorf("segment %d starts %.1f ms from its line (onset sample %d): want within 100 ms", p.Idx, drift, onset)
		}
	}
}

// wantSoundWhere checks sound in the placements and silence elsewhere (20
// ms of slack at each edge for the tone's ramp and the stretcher's frames).
func wantSoundWhere(t *testing.T, loud []bool, placements []Placement, totalMS int) {
	t.Helper()
	for w, isLoud := range loud {
		ms := w * 10
		inside, edge := false, false
		for _, p := range placements {
			end := min(p.EndMS(), totalMS)
			in := ms >= p.StartMS+20 && ms+10 <= end-20
			inside = inside || in
			edge = edge || (ms+10 > p.StartMS-20 && ms < end+20 && !in)
		}
		if !edge && inside != isLoud {
			t.Errorf("at %d ms: loud=%v, want %v", ms, isLoud, inside)
		}
	}
}

func TestAssembleDubErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "clip.wav")
	if err := os.WriteFile(text, []byte("not audio at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "dub.wav")
	clip := func(int) string { return text }
	_, err := AssembleDub(context.Background(), DubInput{Placements: []Placement{{N: 7, Idx: 6, StartMS: 0, OutMS: 500, Tempo: 1}}, Clip: clip, TotalMS: 1000}, out)
	wantPermanent(t, err, "not a PCM WAV")
	if !strings.Contains(err.Error(), "segment 7:") {
		t.Errorf("error %q does not name the segment by its number (from 1)", err)
	}

	overlap := []Placement{{Idx: 0, StartMS: 0, OutMS: 500, Tempo: 1}, {Idx: 1, StartMS: 400, OutMS: 500, Tempo: 1}}
	makeTone(t, text, 600)
	_, err = AssembleDub(context.Background(), DubInput{Placements: overlap, Clip: clip, TotalMS: 1000}, out)
	if err == nil || !strings.Contains(err.Error(), "before the previous one ends") {
		t.Errorf("overlap: got %v", err)
	}
	_, err = AssembleDub(context.Background(), DubInput{Clip: clip, TotalMS: 1000, Mix: MixOptions{Background: "karaoke"}}, out)
	if err == nil || !strings.Contains(err.Error(), "karaoke") {
		t.Errorf("bad mode: got %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output left behind after failures (stat: %v)", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// spreadTimeline places n one-second clips evenly over totalMS.
func spreadTimeline(n, totalMS int) []Placement {
	var slots []Slot
	for i := range n {
		start := i * totalMS / n
		slots = append(slots, Slot{Idx: i, StartMS: start, EndMS: start + 1000, NextStartMS: start + 2000, AudioMS: 1000})
	}
	return Fit(slots, FitOptions{TotalMS: totalMS})
}

// allocated returns the bytes the Go heap allocated while running f.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestAssembleDubMemoryIsFlatInTimelineLength(t *testing.T) {
	dir := t.TempDir()
	clip := filepath.Join(dir, "clip.wav")
	makeTone(t, clip, 1000)
	clips := func(int) string { return clip }
	run := func(totalMS int) uint64 {
		out := filepath.Join(dir, fmt.Sprintf("dub-%d.wav", totalMS))
		var err error
		n := allocated(func() {
			_, err = AssembleDub(context.Background(), DubInput{Placements: spreadTimeline(5, totalMS), Clip: clips, TotalMS: totalMS}, out)
		})
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(out); err != nil || fi.Size() != wavHeaderSize+int64(totalMS)*mixRate/1000*2 {
			t.Fatalf("dub track for %d ms: %v, %v bytes", totalMS, err, fi.Size())
		}
		return n
	}
	oneMinute, tenMinutes := run(60_000), run(600_000)
	t.Logf("allocated: 1-minute timeline %d B, 10-minute timeline %d B (track %d MB)", oneMinute, tenMinutes, 600*mixRate*2>>20)
	// Ten minutes of 48 kHz 16-bit audio is 55 MB; a streaming assembly
	// allocates about the same for both timelines, give or take exec noise.
	if tenMinutes > oneMinute+512<<10 {
		t.Errorf("10-minute timeline allocated %d B, 1-minute %d B: memory grows with the timeline", tenMinutes, oneMinute)
	}
}

// TestAssembleDubInParts assembles two minutes of dub (26 s stretched)
// in one part and in as many parts as four cores allow: the timeline is
// cut in silence, so the tracks are the same to within a sample's
// rounding.
func TestAssembleDubInParts(t *testing.T) {
	dir := t.TempDir()
	in := makeBenchInput(t, dir, 2)
	tracks := map[int][]int16{}
	for _, cores := range []int{1, 4} {
		parts := splitVoice(in.placements, in.totalMS, cores)
		for i, p := range parts {
			if i > 0 && p.fromMS != parts[i-1].toMS || len(p.placements) > 0 && p.placements[0].StartMS < p.fromMS ||
				len(p.placements) > 0 && p.placements[len(p.placements)-1].EndMS() > p.toMS {
				t.Fatalf("part %d [%d, %d) does not hold its lines: %+v", i, p.fromMS, p.toMS, p.placements)
			}
		}
		t.Logf("%d cores: %d parts", cores, len(parts))
		if cores > 1 && len(parts) < 2 {
			t.Fatalf("%d cores: %d parts", cores, len(parts))
		}
		prev := runtime.GOMAXPROCS(cores)
		out := filepath.Join(dir, fmt.Sprintf("dub-%d.wav", cores))
		_, err := AssembleDub(context.Background(), DubInput{Placements: in.placements, Clip: in.clip, TotalMS: in.totalMS,
			Original: in.soundtrack, Speech: in.speech}, out)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		tracks[cores] = readAll(t, readWAV(t, out), 1<<16)
	}
	one, many := tracks[1], tracks[4]
	if len(one) != len(many) {
		t.Fatalf("%d samples in one part, %d in parts", len(one), len(many))
	}
	worst := 0
	for i := range one {
		worst = max(worst, abs(int(one[i])-int(many[i])))
	}
	t.Logf("largest difference: %d", worst)
	if worst > 2 {
		t.Errorf("tracks differ by up to %d", worst)
	}
}

// TestSplitVoiceBoundsTheLinesAPartStretches: each stretched line is a
// rubberband filter in its part's ffmpeg, so an hour's timeline (450
// stretched lines) is cut into parts of at most maxPartStretched of them —
// the ffmpeg stays the size it is for a short video — while a short
// timeline keeps as many parts as cores.
func TestSplitVoiceBoundsTheLinesAPartStretches(t *testing.T) {
	timeline := func(lines int) ([]Placement, int) {
		var ps []Placement
		for i := range lines {
			tempo := 1.0
			if i%2 == 0 {
				tempo = 1.2
			}
			ps = append(ps, Placement{Idx: i, StartMS: i * 4000, SlotMS: 2500, AudioMS: 3000, OutMS: 2500, Tempo: tempo})
		}
		return ps, lines * 4000
	}
	for _, c := range []struct {
		lines, cores, minParts, maxParts int
	}{{900, 2, 900 / 2 / maxPartStretched, 900/2/maxPartStretched + 2}, {40, 2, 2, 2}, {40, 1, 1, 1}} {
		ps, total := timeline(c.lines)
		parts := splitVoice(ps, total, c.cores)
		lines := 0
		for i, p := range parts {
			stretched := 0
			for _, pl := range p.placements {
				if pl.Tempo != 1 {
					stretched++
				}
			}
			if stretched > maxPartStretched {
				t.Errorf("%d lines: part %d stretches %d lines, more than %d", c.lines, i, stretched, maxPartStretched)
			}
			if i > 0 && p.fromMS != parts[i-1].toMS {
				t.Fatalf("%d lines: part %d starts at %d, the previous ends at %d", c.lines, i, p.fromMS, parts[i-1].toMS)
			}
			lines += len(p.placements)
		}
		if lines != c.lines || parts[len(parts)-1].toMS != total || parts[0].fromMS != 0 {
			t.Fatalf("%d lines: parts hold %d lines over [%d, %d)", c.lines, lines, parts[0].fromMS, parts[len(parts)-1].toMS)
		}
		if len(parts) < c.minParts || len(parts) > c.maxParts {
			t.Errorf("%d lines on %d cores: %d parts, want %d to %d", c.lines, c.cores, len(parts), c.minParts, c.maxParts)
		}
	}
}
