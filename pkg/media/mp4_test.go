package media

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/subtitle"
)

// TestMP4DurationIsFFprobes: the length MP4Duration reads from the movie
// header is the container duration ffprobe reports, to the microsecond,
// for the MP4s ffmpeg writes (a sample, Mux's outputs with and without
// burned subtitles, the unlimited mux of a video longer than it claims);
// files it cannot read are errors (so Mux falls back to ffprobe).
func TestMP4DurationIsFFprobes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dub := filepath.Join(dir, "dub.wav")
	makeTone(t, dub, 1700)
	srt := filepath.Join(dir, "es.srt")
	writeSRT(t, srt, []subtitle.Cue{{StartMS: 0, EndMS: 900, Text: "Hola."}})
	files := []string{sample(t, SampleSpeech), sample(t, SampleNoAudio), sample(t, SampleSilent)}
	for i, in := range []MuxInput{
		{Video: sample(t, SampleSpeech), DubWav: dub},
		{Video: sample(t, SampleNoAudio), DubWav: dub, Subtitles: []Subtitle{{Path: srt, Language: "es"}}},
		{Video: sample(t, SampleSpeech), DubWav: dub, BurnSubtitles: srt},
		{Video: sample(t, SampleLongerThanClaimed), DubWav: dub},
	} {
		in.DubLanguage, in.OriginalLanguage = "es", "en"
		out := filepath.Join(dir, "out"+string(rune('a'+i))+".mp4")
		if err := Mux(ctx, in, out); err != nil {
			t.Fatal(err)
		}
		files = append(files, out)
	}
	for _, f := range files {
		got, err := MP4Duration(f)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		info, err := Probe(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if d := (got - info.Duration).Abs(); d > time.Microsecond || got <= 0 {
			t.Errorf("%s: movie header says %v, ffprobe %v", filepath.Base(f), got, info.Duration)
		}
	}
	trunc := filepath.Join(dir, "trunc.mp4")
	raw, err := os.ReadFile(files[3])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trunc, raw[:200], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{dub, trunc, sample(t, SampleTruncatedIndex), sample(t, SampleLongerThanClaimed), filepath.Join(dir, "missing.mp4")} {
		if d, err := MP4Duration(f); err == nil {
			t.Errorf("%s: read %v from a file without a readable movie header", filepath.Base(f), d)
		}
	}
}
