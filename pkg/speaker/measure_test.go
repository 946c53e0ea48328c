package speaker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dubflow/dubflow/pkg/speaker"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// fixture returns a speech fixture (speechtest.Fixture: DUBFLOW_FIXTURES,
// else shared/fixtures/speech above the working directory).
func fixture(t testing.TB, name string) string {
	t.Helper()
	return speechtest.Fixture(t, name)
}

// ffmpeg runs ffmpeg with args.
func ffmpeg(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(context.Background(), "ffmpeg", append([]string{"-nostdin", "-v", "error", "-y"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", args, err, out)
	}
}

func measure(t *testing.T, wav string, spans []speaker.Span) []speaker.Voice {
	t.Helper()
	f, err := os.Open(wav)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := speaker.Measure(f, spans)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMeasureFixtures(t *testing.T) {
	for _, name := range []string{"jfk.wav", "two_cities.wav"} {
		v := measure(t, fixture(t, name), []speaker.Span{{0, 4000}, {4000, 8000}, {8000, 11000}})
		t.Logf("%s: %+v", name, v)
	}
}

// twoSpeakers builds, at test time, a clip of jfk.wav (a higher voice),
// one second of silence, then the first 11 s of two_cities.wav (a lower
// one), as 16 kHz mono WAV.
func twoSpeakers(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "two.wav")
	ffmpeg(t, "-i", fixture(t, "jfk.wav"), "-i", fixture(t, "two_cities.wav"), "-filter_complex",
		"[0:a]aresample=16000,aformat=channel_layouts=mono,apad=pad_dur=1[a];"+
			"[1:a]aresample=16000,aformat=channel_layouts=mono,atrim=0:11[b];[a][b]concat=n=2:v=0:a=1",
		"-c:a", "pcm_s16le", out)
	return out
}

func TestTwoSpeakersGetTwoVoices(t *testing.T) {
	spans := []speaker.Span{{0, 3500}, {3500, 7000}, {7000, 11000}, {12000, 15500}, {15500, 19000}, {19000, 23000}}
	voices := measure(t, twoSpeakers(t), spans)
	turns := speaker.Cluster(voices, 4)
	t.Logf("voices %+v\nturns %+v", voices, turns)
	for i, want := range []string{"S1", "S1", "S1", "S2", "S2", "S2"} {
		if turns[i].Speaker != want {
			t.Fatalf("span %d: speaker %s, want %s (turns %+v)", i, turns[i].Speaker, want, turns)
		}
	}
	got := speaker.Assign(turns, speaker.EspeakVoices, "es", "")
	// jfk speaks higher than the two_cities reader: a high and a low voice.
	if got["S1"] != "es+f2" || got["S2"] != "es+m3" {
		t.Errorf("voices %v, want S1 es+f2 (high), S2 es+m3 (low)", got)
	}
}

func TestOneSpeakerStaysOne(t *testing.T) {
	var spans []speaker.Span
	for s := 0; s < 44000; s += 5500 {
		spans = append(spans, speaker.Span{StartMS: s, EndMS: s + 5000})
	}
	turns := speaker.Cluster(measure(t, fixture(t, "two_cities.wav"), spans), 4)
	for i, tr := range turns {
		if tr.Speaker != "S1" {
			t.Fatalf("span %d: speaker %s, want S1 only (%+v)", i, tr.Speaker, turns)
		}
	}
	if got := speaker.Assign(turns, speaker.EspeakVoices, "es", "es+f3"); len(got) != 1 || got["S1"] != "es+f3" {
		t.Errorf("voices %v, want the task's own voice", got)
	}
}
