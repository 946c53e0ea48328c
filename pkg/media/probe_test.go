package media

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProbeSpeechSample(t *testing.T) {
	info, err := Probe(context.Background(), sample(t, SampleSpeech))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.FormatName, "mp4") {
		t.Errorf("format %q, want mp4", info.FormatName)
	}
	if info.Duration < 3*time.Second || info.Duration > 10*time.Second {
		t.Errorf("duration %v, want a few seconds", info.Duration)
	}
	v, a := info.StreamsOf(VideoStream), info.StreamsOf(AudioStream)
	if len(v) != 1 || v[0].Codec != "h264" || v[0].Width != 320 || v[0].Height != 240 {
		t.Errorf("video streams %+v, want one 320x240 h264", v)
	}
	if len(a) != 1 || a[0].Codec != "aac" || a[0].SampleRate != 22050 || a[0].Channels != 1 {
		t.Errorf("audio streams %+v, want one mono 22050 Hz aac", a)
	}
	if err := info.Check(Limits{RequireAudio: true, RequireVideo: true, MaxDuration: time.Minute}); err != nil {
		t.Errorf("check: %v", err)
	}
}

func TestProbeBadInputs(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.mp4")
	if err := os.WriteFile(text, []byte("these are my notes, not a video\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An HLS playlist renamed .mp4 would make ffmpeg read the files it names.
	playlist := filepath.Join(dir, "playlist.mp4")
	hls := "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n"
	if err := os.WriteFile(playlist, []byte(hls), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.mp4")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"text file", text, "not a media file: "},
		{"empty file", empty, "not a media file: "},
		{"hls playlist", playlist, "unsupported format hls"},
		{"truncated index", sample(t, SampleTruncatedIndex), "truncated media file (moov atom missing)"},
		{"directory", dir, "not a regular file"},
		{"device", "/dev/zero", "not a regular file"},
		{"url", "http://example.com/a.mp4", "looks like a URL"},
		{"protocol", "concat:" + text + "|" + text, "looks like a URL"},
		{"option", "-i", "looks like an option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Probe(context.Background(), tt.path)
			wantPermanent(t, err, tt.want)
		})
	}
}

func TestProbeMissingFileIsNotPermanent(t *testing.T) {
	_, err := Probe(context.Background(), filepath.Join(t.TempDir(), "gone.mp4"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want a not-exist error", err)
	}
}

func TestProbeHostileNames(t *testing.T) {
	src, err := os.ReadFile(sample(t, SampleSpeech))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"-i", "-y", "a b.mp4", `it's "quoted".mp4`, "semi;colon $(x).mp4", "file:odd.mp4", "|pipe.mp4"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, src, 0o644); err != nil {
				t.Fatal(err)
			}
			info, err := ProbeInput(context.Background(), path, Limits{RequireAudio: true})
			if err != nil {
				t.Fatalf("probe %q: %v", path, err)
			}
			if len(info.StreamsOf(AudioStream)) != 1 {
				t.Errorf("streams %+v", info.Streams)
			}
		})
	}
}

func TestCheckLimits(t *testing.T) {
	long := &Info{Path: "long.mp4", Duration: 2*time.Hour + 10*time.Minute, Streams: []Stream{{Type: VideoStream}, {Type: AudioStream}}}
	wantPermanent(t, long.Check(Limits{MaxDuration: time.Hour}), "video is 2h10m, limit 1h")
	if err := long.Check(Limits{MaxDuration: 3 * time.Hour, RequireAudio: true}); err != nil {
		t.Errorf("within limits: %v", err)
	}
	unknown := &Info{Path: "raw.aac", Streams: []Stream{{Type: AudioStream}}}
	wantPermanent(t, unknown.Check(Limits{MaxDuration: time.Hour}), "duration of raw.aac is unknown")
	noAudio := &Info{Path: "v.mp4", Duration: time.Second, Streams: []Stream{{Type: VideoStream}}}
	wantPermanent(t, noAudio.Check(Limits{RequireAudio: true}), "no audio stream in v.mp4")

	_, err := ProbeInput(context.Background(), sample(t, SampleNoAudio), Limits{RequireAudio: true})
	wantPermanent(t, err, "no audio stream in ")
	_, err = ProbeInput(context.Background(), sample(t, SampleSpeech), Limits{MaxDuration: 2 * time.Second})
	wantPermanent(t, err, ", limit 2s")
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                    "0s",
		45 * time.Second:                     "45s",
		90 * time.Second:                     "1m30s",
		time.Hour:                            "1h",
		2*time.Hour + 10*time.Minute:         "2h10m",
		time.Hour + 5*time.Second:            "1h0m5s",
		2*time.Minute + 400*time.Millisecond: "2m",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
