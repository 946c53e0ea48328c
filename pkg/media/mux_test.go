package media

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/subtitle"
)

// videoMD5 hashes the video packets of path as stored, without decoding.
func videoMD5(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-i", path, "-map", "0:v", "-c", "copy", "-f", "md5", "-").Output()
	if err != nil {
		t.Fatalf("hash video of %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

func writeSRT(t *testing.T, path string, cues []subtitle.Cue) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := subtitle.WriteSRT(f, cues); err != nil {
		t.Fatal(err)
	}
}

func TestMux(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	video := sample(t, SampleSpeech)
	src, err := Probe(ctx, video)
	if err != nil {
		t.Fatal(err)
	}
	videoLen := src.StreamsOf(VideoStream)[0].Duration

	// A dub track shorter than the video: Mux must pad it to the video's length.
	clip := filepath.Join(dir, "clip.wav")
	makeTone(t, clip, 1500)
	dub := filepath.Join(dir, "dub track.wav")
	total := int(videoLen.Milliseconds()) - 1000
	if _, err := AssembleDub(ctx, DubInput{Placements: Fit([]Slot{{Idx: 0, StartMS: 500, EndMS: 2000, AudioMS: 1500}}, FitOptions{TotalMS: total}),
		Clip: func(int) string { return clip }, TotalMS: total}, dub); err != nil {
		t.Fatal(err)
	}
	es, en := filepath.Join(dir, "es.srt"), filepath.Join(dir, "en.srt")
	writeSRT(t, es, []subtitle.Cue{{StartMS: 500, EndMS: 2000, Text: "Buenos días."}})
	writeSRT(t, en, []subtitle.Cue{{StartMS: 500, EndMS: 2000, Text: "Good morning."}})

	out := filepath.Join(dir, "final \"dub\".mp4")
	err = Mux(ctx, MuxInput{
		Video: video, DubWav: dub, DubLanguage: "es", OriginalLanguage: "en-US",
		Subtitles: []Subtitle{{Path: es, Language: "es", Title: "Español"}, {Path: en, Language: "eng"}},
	}, out)
	if err != nil {
		t.Fatal(err)
	}

	if got, want := videoMD5(t, out), videoMD5(t, video); got != want {
		t.Errorf("video packets changed: %s, source %s", got, want)
	}
	checkMuxed(t, out, videoLen)
}

// checkMuxed checks the tracks of TestMux's output.
func checkMuxed(t *testing.T, out string, videoLen time.Duration) {
	t.Helper()
	info, err := Probe(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.FormatName, "mp4") {
		t.Errorf("format %s", info.FormatName)
	}
	audio := info.StreamsOf(AudioStream)
	if len(audio) != 2 {
		t.Fatalf("audio streams %+v, want dub and original", audio)
	}
	if a := audio[0]; a.Codec != "aac" || a.Language != "spa" || !a.Default || a.Title != "Dub (spa)" {
		t.Errorf("first audio track %+v, want the default aac dub tagged spa", a)
	}
	if a := audio[1]; a.Codec != "aac" || a.Language != "eng" || a.Default {
		t.Errorf("second audio track %+v, want the original tagged eng, not default", a)
	}
	subs := info.StreamsOf(SubtitleStream)
	if len(subs) != 2 || subs[0].Codec != "mov_text" || subs[0].Language != "spa" || subs[0].Title != "Español" ||
		subs[1].Language != "eng" || subs[1].Title != "eng" || subs[1].Default {
		t.Errorf("subtitle streams %+v, want mov_text spa and eng", subs)
	}
	if d := (audio[0].Duration - videoLen).Abs(); d > 50*time.Millisecond {
		t.Errorf("dub track lasts %v, video %v", audio[0].Duration, videoLen)
	}
	if d := (info.Duration - videoLen).Abs(); d > 50*time.Millisecond {
		t.Errorf("output lasts %v, video %v", info.Duration, videoLen)
	}
	if !moovBeforeMdat(t, out) {
		t.Error("index is not at the front (faststart)")
	}
}

func TestMuxTrimsLongDubAndHandlesVideoWithoutAudio(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	video := sample(t, SampleNoAudio)
	src, err := Probe(ctx, video)
	if err != nil {
		t.Fatal(err)
	}
	dub := filepath.Join(dir, "long.wav")
	makeTone(t, dub, int(src.Duration.Milliseconds())+3000)
	out := filepath.Join(dir, "out.mp4")
	if err := Mux(ctx, MuxInput{Video: video, DubWav: dub, DubLanguage: "fr"}, out); err != nil {
		t.Fatal(err)
	}
	info, err := Probe(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	audio := info.StreamsOf(AudioStream)
	if len(audio) != 1 || audio[0].Language != "fra" {
		t.Fatalf("audio %+v, want only the dub tagged fra", audio)
	}
	if d := (info.Duration - src.Duration).Abs(); d > 50*time.Millisecond {
		t.Errorf("output lasts %v, video %v", info.Duration, src.Duration)
	}
}

func TestMuxBadInputs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dub := filepath.Join(dir, "dub.wav")
	makeTone(t, dub, 500)
	out := filepath.Join(dir, "out.mp4")
	wantPermanent(t, Mux(ctx, MuxInput{Video: sample(t, SampleTruncatedIndex), DubWav: dub}, out), "moov atom missing")
	if err := Mux(ctx, MuxInput{Video: sample(t, SampleSpeech), DubWav: dub, DubLanguage: "not a language"}, out); err == nil {
		t.Error("bad language accepted")
	}
	notWav := filepath.Join(dir, "dub.txt")
	os.WriteFile(notWav, []byte("text"), 0o644)
	if err := Mux(ctx, MuxInput{Video: sample(t, SampleSpeech), DubWav: notWav}, out); err == nil {
		t.Error("text file accepted as the dub track")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output left behind (stat: %v)", err)
	}
}

func TestISO639(t *testing.T) {
	for in, want := range map[string]string{"": "und", "es": "spa", "es-MX": "spa", "spa": "spa", "en": "eng", "EN-us": "eng", "zh": "zho", "de": "deu", "ja": "jpn"} {
		got, err := ISO639(in)
		if err != nil || got != want {
			t.Errorf("ISO639(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"xx-not", "12", "english please"} {
		if got, err := ISO639(bad); err == nil {
			t.Errorf("ISO639(%q) = %q, want an error", bad, got)
		}
	}
}

// moovBeforeMdat reports whether the MP4's top-level moov box precedes mdat.
func moovBeforeMdat(t *testing.T, path string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	moov, mdat := strings.Index(string(data), "moov"), strings.Index(string(data), "mdat")
	return moov >= 0 && mdat >= 0 && moov < mdat
}

// grayFrame decodes the frame of path at second sec as 8-bit gray pixels.
func grayFrame(t *testing.T, path string, sec float64) []byte {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-ss", strconv.FormatFloat(sec, 'f', 3, 64), "-i", path,
		"-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "gray", "-").Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("frame of %s at %vs: %v", path, sec, err)
	}
	return out
}

// TestMuxBurnsSubtitles burns a subtitle into the picture: the frames
// change in the bottom band while the cue shows, and nowhere else.
func TestMuxBurnsSubtitles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	video := sample(t, SampleSpeech)
	dub := filepath.Join(dir, "dub.wav")
	makeTone(t, dub, 1000)
	srt := filepath.Join(dir, "es: 'dub' [1].srt") // quoting in the filter graph
	writeSRT(t, srt, []subtitle.Cue{{StartMS: 500, EndMS: 2500, Text: "SUBTÍTULO GRANDE"}})
	out := filepath.Join(dir, "burnt.mp4")
	if err := Mux(ctx, MuxInput{Video: video, DubWav: dub, DubLanguage: "es", BurnSubtitles: srt}, out); err != nil {
		t.Fatal(err)
	}
	info, err := Probe(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if v := info.StreamsOf(VideoStream); len(v) != 1 || v[0].Codec != "h264" {
		t.Fatalf("video streams %+v", v)
	}
	diff := func(at float64) (top, bottom float64) {
		a, b := grayFrame(t, video, at), grayFrame(t, out, at)
		if len(a) != len(b) {
			t.Fatalf("frame sizes %d and %d", len(a), len(b))
		}
		split := len(a) * 3 / 4
		for i := range a {
			d := math.Abs(float64(a[i]) - float64(b[i]))
			if i < split {
				top += d / float64(split)
			} else {
				bottom += d / float64(len(a)-split)
			}
		}
		return top, bottom
	}
	top, bottom := diff(1.5)
	t.Logf("while the cue shows: mean pixel change %.2f above, %.2f in the bottom quarter", top, bottom)
	if bottom < 2 || bottom < 4*top {
		t.Errorf("no subtitle burnt in the bottom quarter (change %.2f there, %.2f above)", bottom, top)
	}
	if _, after := diff(3.2); after > bottom/4 {
		t.Errorf("after the cue, the bottom quarter still changed by %.2f", after)
	}
}

// TestDubBitrate: a stereo soundtrack's dub is encoded at 192 kb/s, a mono
// one's, or a video's without sound, at 128 kb/s.
func TestDubBitrate(t *testing.T) {
	for _, c := range []struct {
		streams []Stream
		want    string
	}{
		{[]Stream{{Type: VideoStream}, {Type: AudioStream, Channels: 2}}, "192k"},
		{[]Stream{{Type: VideoStream}, {Type: AudioStream, Channels: 6}}, "192k"},
		{[]Stream{{Type: VideoStream}, {Type: AudioStream, Channels: 1}}, "128k"},
		{[]Stream{{Type: VideoStream}}, "128k"},
	} {
		if got := (&muxJob{info: &Info{Streams: c.streams}}).dubBitrate(); got != c.want {
			t.Errorf("streams %+v: %s, want %s", c.streams, got, c.want)
		}
	}
}

// TestMuxTakesTheCallersProbe: with the video's probe given, Mux muxes as
// it does after probing itself, and still refuses a probe without video.
func TestMuxTakesTheCallersProbe(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dub := filepath.Join(dir, "dub.wav")
	makeTone(t, dub, 500)
	video := sample(t, SampleSpeech)
	info, err := ProbeInput(ctx, video, Limits{RequireVideo: true})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.mp4")
	if err := Mux(ctx, MuxInput{Video: video, DubWav: dub, Info: info}, out); err != nil {
		t.Fatal(err)
	}
	got, err := Probe(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.StreamsOf(VideoStream)) != 1 || len(got.StreamsOf(AudioStream)) != 2 {
		t.Errorf("output streams %+v, want one video and two audio", got.Streams)
	}
	audioOnly, err := Probe(ctx, dub)
	if err != nil {
		t.Fatal(err)
	}
	wantPermanent(t, Mux(ctx, MuxInput{Video: dub, DubWav: dub, Info: audioOnly}, filepath.Join(dir, "none.mp4")), "no video stream")
}
