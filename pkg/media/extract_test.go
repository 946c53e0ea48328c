package media

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestExtractAudio(t *testing.T) {
	ctx := context.Background()
	in := sample(t, SampleSpeech)
	out := filepath.Join(t.TempDir(), "it's a \"wav\".wav")
	if err := ExtractAudio(ctx, in, out, 0); err != nil {
		t.Fatal(err)
	}
	r := readWAV(t, out)
	if r.Format != (WAVFormat{SampleRate: 16000, Channels: 1, BitsPerSample: 16}) {
		t.Errorf("format %+v, want 16 kHz mono 16-bit", r.Format)
	}
	info, err := Probe(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := (r.Duration() - info.StreamsOf(AudioStream)[0].Duration).Abs(); diff > 100*time.Millisecond {
		t.Errorf("extracted %v, source audio %v", r.Duration(), info.StreamsOf(AudioStream)[0].Duration)
	}
	v, err := MeasureVolume(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if v.MaxDB < -20 || v.MeanDB < -45 {
		t.Errorf("extracted speech is too quiet: %+v", v)
	}
	if silent, err := IsSilent(ctx, out); err != nil || silent {
		t.Errorf("IsSilent(speech) = %v, %v", silent, err)
	}
}

func TestExtractAudioSilent(t *testing.T) {
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "silent.wav")
	if err := ExtractAudio(ctx, sample(t, SampleSilent), out, 0); err != nil {
		t.Fatal(err)
	}
	silent, err := IsSilent(ctx, out)
	if err != nil || !silent {
		t.Errorf("IsSilent(silence) = %v, %v", silent, err)
	}
	mean, err := MeanVolume(ctx, out)
	if err != nil || mean > -80 {
		t.Errorf("MeanVolume(silence) = %v, %v", mean, err)
	}
}

func TestExtractAudioBadInputs(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.mp4")
	if err := os.WriteFile(text, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, want string }{
		{"no audio", sample(t, SampleNoAudio), "no audio stream in "},
		{"truncated data", sample(t, SampleTruncatedData), "truncated media file (data missing)"},
		{"truncated index", sample(t, SampleTruncatedIndex), "moov atom missing"},
		{"text", text, "not a media file"},
		{"url", "https://example.com/x.mp4", "looks like a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, tt.name+".wav")
			wantPermanent(t, ExtractAudio(context.Background(), tt.in, out, 0), tt.want)
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output %s left behind after a failure (stat: %v)", out, err)
			}
		})
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left in %s: %v", dir, entries)
	}
}

func TestExtractAudioTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := ExtractAudio(ctx, sample(t, SampleSpeech), filepath.Join(t.TempDir(), "x.wav"), 0)
	if err == nil || !errorsIsCanceled(err) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestMeasureVolumeOfSparseLoudSamples: silence with a few loud samples
// of many levels makes volumedetect print a long histogram after its mean
// and max; the result must still be read (it was cut off with the log's
// head once).
func TestMeasureVolumeOfSparseLoudSamples(t *testing.T) {
	requireTools(t)
	path := filepath.Join(t.TempDir(), "sparse.wav")
	// One sample at each level from -1 dB down to -90 dB, 1000 samples apart.
	writeBenchWAV(t, path, 16000, 160000, func(i int64) int16 {
		if i%1000 != 0 || i/1000 >= 90 {
			return 0
		}
		return int16(32767 * math.Pow(10, -float64(i/1000+1)/20))
	})
	v, err := MeasureVolume(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if v.MaxDB < -1.5 || v.MaxDB > -0.5 {
		t.Errorf("max %.1f dB, want about -1", v.MaxDB)
	}
}
