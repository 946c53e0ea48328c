package media

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// toneUnderSpeech writes the film's soundtrack for the background tests:
// a steady 3 kHz tone for 16 s (hard left when stereo, the way music
// often sits beside the dialogue), with the jfk fixture spoken from 2 s to
// 13 s in the centre.
func toneUnderSpeech(t *testing.T, out string, stereo bool) {
	t.Helper()
	requireTools(t)
	jfk := speechtest.Fixture(t, "jfk.wav")
	graph := "[0:a]adelay=2000,apad=whole_dur=16,aformat=channel_layouts=mono[s];" +
		"sine=f=3000:sample_rate=16000:d=16,volume=0.5,aformat=channel_layouts=mono[t];"
	if stereo {
		graph += "[s]pan=stereo|c0=c0|c1=c0[s2];[t]pan=stereo|c0=c0|c1=0*c0[t2];[s2][t2]"
	} else {
		graph += "[s][t]"
	}
	graph += "amix=inputs=2:normalize=0[out]"
	cmd := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-i", jfk, "-filter_complex", graph, "-map", "[out]",
		"-ar", "48000", "-c:a", "pcm_s16le", "-y", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make soundtrack: %v: %s", err, b)
	}
}

// spanish speaks text with espeak-ng into a WAV clip and returns its length.
func spanish(t *testing.T, text, out string) int {
	t.Helper()
	cmd := exec.Command("espeak-ng", "-v", "es", "-w", out, "--stdin")
	cmd.Stdin = strings.NewReader(text)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, b)
	}
	d, err := WAVFileDuration(out)
	if err != nil {
		t.Fatal(err)
	}
	return int(d.Milliseconds())
}

// speechBand is the jfk fixture's speech under 2 kHz, away from the tone
// of toneUnderSpeech; toneBand is the tone.
const (
	speechBand = "lowpass=f=2000:poles=2,lowpass=f=2000:poles=2,"
	toneBand   = "bandpass=f=3000:width_type=q:w=8,bandpass=f=3000:width_type=q:w=8,"
)

var rmsLevel = regexp.MustCompile(`RMS level dB: (-?[0-9.]+|-inf)`)

// rmsDB measures the RMS level (dBFS, all channels) of file between from
// and to seconds with ffmpeg's astats.
func rmsDB(t *testing.T, file string, from, to float64) float64 {
	t.Helper()
	return rmsDBAfter(t, file, "", from, to)
}

// TestDubKeepsTheSoundtrack dubs a soundtrack with a steady tone under
// speech: where nobody speaks, the dub track keeps the tone within 6 dB of
// the original's level; under the original speech, where no dubbed line
// plays, the speech is lowered (duck) or loses its centre (reduce_center)
// while the tone stays within 6 dB; with none all is gone.
func TestDubKeepsTheSoundtrack(t *testing.T) {
	dir := t.TempDir()
	lines := []string{"Y así, compatriotas americanos.", "Pregunten qué pueden hacer ustedes por su país."}
	var slots []Slot
	for i, text := range lines {
		ms := spanish(t, text, filepath.Join(dir, fmt.Sprintf("clip-%d.wav", i)))
		start := 2500 + i*6000
		slots = append(slots, Slot{Idx: i, StartMS: start, EndMS: start + 4000, NextStartMS: start + 6000, AudioMS: ms})
	}
	clip := func(idx int) string { return filepath.Join(dir, fmt.Sprintf("clip-%d.wav", idx)) }
	const totalMS = 16000
	placements := Fit(slots, FitOptions{TotalMS: totalMS})
	// A window under the original speech with no dubbed line, past the ramps.
	gapFrom, gapTo := float64(placements[0].EndMS())/1000+0.4, float64(placements[1].StartMS)/1000-0.2
	if gapTo-gapFrom < 0.4 {
		t.Fatalf("no speech window without a dubbed line: %+v", placements)
	}
	for _, tc := range []struct {
		mode   string
		stereo bool
		// underSpeech bounds the level under the original speech relative
		// to the original there: at most max dB.
		maxUnder float64
	}{
		{BackgroundDuck, false, -10},
		{BackgroundReduceCenter, true, -6},
		{BackgroundNone, false, -60},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			orig := filepath.Join(dir, tc.mode+"-orig.wav")
			toneUnderSpeech(t, orig, tc.stereo)
			out := filepath.Join(dir, tc.mode+"-dub.wav")
			rep, err := AssembleDub(context.Background(), DubInput{Placements: placements, Clip: clip, TotalMS: totalMS,
				Original: orig, Speech: []Span{{2000, 13000}}, Mix: MixOptions{Background: tc.mode}}, out)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("mix: %+v", rep)
			keep(t, orig, out)
			for _, w := range [][2]float64{{0.2, 1.8}, {13.5, 15.8}} {
				o, d := rmsDB(t, orig, w[0], w[1]), rmsDB(t, out, w[0], w[1])
				t.Logf("%s, speech-free %.1f–%.1f s: original %.1f dB, dub %.1f dB", tc.mode, w[0], w[1], o, d)
				if tc.mode != BackgroundNone && (d-o > 6 || o-d > 6) {
					t.Errorf("speech-free %.1f–%.1f s: tone at %.1f dB in the dub, %.1f dB in the original: more than 6 dB apart", w[0], w[1], d, o)
				}
			}
			// Under the original speech the speech goes down: measured under
			// 2 kHz, away from the tone, which the soundtrack keeps (the
			// bed is kept per frequency, not lowered whole).
			o, d := rmsDBAfter(t, orig, speechBand, gapFrom, gapTo), rmsDBAfter(t, out, speechBand, gapFrom, gapTo)
			t.Logf("%s, under speech without a dubbed line %.1f–%.1f s, under 2 kHz: original %.1f dB, dub %.1f dB", tc.mode, gapFrom, gapTo, o, d)
			if d-o > tc.maxUnder {
				t.Errorf("under the original speech the dub is at %.1f dB under 2 kHz, the original %.1f dB: want at least %.0f dB lower", d, o, -tc.maxUnder)
			}
			o, d = rmsDBAfter(t, orig, toneBand, gapFrom, gapTo), rmsDBAfter(t, out, toneBand, gapFrom, gapTo)
			t.Logf("%s, under speech without a dubbed line %.1f–%.1f s, the 3 kHz tone: original %.1f dB, dub %.1f dB", tc.mode, gapFrom, gapTo, o, d)
			if tc.mode != BackgroundNone && math.Abs(d-o) > 6 {
				t.Errorf("under the original speech the 3 kHz tone is at %.1f dB in the dub, %.1f dB in the original: more than 6 dB apart", d, o)
			}
		})
	}
}

// keep copies files into the folder MEDIA_TEST_KEEP names, when set, so
// that a person can listen to them and look at their spectrograms.
func keep(t *testing.T, files ...string) {
	dir := os.Getenv("MEDIA_TEST_KEEP")
	if dir == "" {
		return
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
		}
		if err != nil {
			t.Errorf("keep %s: %v", f, err)
		}
	}
}
