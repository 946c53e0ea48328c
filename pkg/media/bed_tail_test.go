package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// The clip of TestDubKeepsTheBedThroughASourceLine: the two_cities
// fixture spoken from speechAt over a music-like bed (two tones with
// tremolo, pink noise) some 14 dB under the speech, 16 s long.
const (
	bedClipMS = 16000
	speechAt  = 2.0
)

// sourceLines are the fixture's first lines (its pauses, from ffmpeg's
// silencedetect at -40 dB), shifted by speechAt, in ms.
var sourceLines = []Span{{3210, 6540}, {7040, 8150}, {8690, 10180}, {10770, 12280}, {12800, 14720}}

// readMono reads a mono 16-bit WAV file into samples within ±1.
func readMono(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewWAVReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Format.Channels != 1 || r.Format.SampleRate != mixRate {
		t.Fatalf("%s: %d channels at %d Hz, want mono at %d", path, r.Format.Channels, r.Format.SampleRate, mixRate)
	}
	var out []float64
	buf := make([]int16, 1<<14)
	for {
		n, err := r.ReadSamples(buf)
		for _, s := range buf[:n] {
			out = append(out, float64(s)/32768)
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeMono(t *testing.T, path string, samples []float64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := NewWAVWriter(f, mixRate, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := make([]int16, len(samples))
	for i, x := range samples {
		s[i] = toInt16(float32(x))
	}
	if err := w.WriteSamples(s); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// ffmpegWAV runs an ffmpeg filter graph whose output [out] is written as a
// mono 48 kHz WAV file.
func ffmpegWAV(t *testing.T, out string, args ...string) {
	t.Helper()
	args = append(append([]string{"-nostdin", "-v", "error"}, args...), "-ac", "1", "-ar", "48000", "-c:a", "pcm_s16le", "-y", out)
	if b, err := exec.Command("ffmpeg", args...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v: %s", args, err, b)
	}
}

// bandDB is the RMS level (dBFS) of file between from and to seconds
// after the ffmpeg filter band ("anull" for all of it).
func bandDB(t *testing.T, file, band string, from, to float64) float64 {
	t.Helper()
	return rmsDBAfter(t, file, band+",", from, to)
}

func rmsDBAfter(t *testing.T, file, filter string, from, to float64) float64 {
	t.Helper()
	af := fmt.Sprintf("%satrim=start=%g:end=%g,astats=measure_perchannel=none", filter, from, to)
	b, err := exec.Command("ffmpeg", "-nostdin", "-hide_banner", "-i", file, "-af", af, "-f", "null", "-").CombinedOutput()
	if err != nil {
		t.Fatalf("astats: %v: %s", err, b)
	}
	m := rmsLevel.FindAllStringSubmatch(string(b), -1)
	if len(m) == 0 {
		t.Fatalf("astats printed no RMS level: %s", b)
	}
	if m[len(m)-1][1] == "-inf" {
		return -200
	}
	v, err := strconv.ParseFloat(m[len(m)-1][1], 64)
	if err != nil {
		t.Fatalf("astats RMS level %q: %v", m[len(m)-1][1], err)
	}
	return v
}

// The bands the test measures: the bed's low end (its 165 Hz tone and
// the noise under 250 Hz), its top (the noise and the 1760 Hz tone's
// surroundings over 1.5 kHz, where last session's dub lost 16 dB) and
// the voice band, where the original speech has most of its energy.
const (
	lowBand   = "lowpass=f=250:poles=2,lowpass=f=250:poles=2"
	highBand  = "highpass=f=1500:poles=2,highpass=f=1500:poles=2"
	voiceBand = "highpass=f=300:poles=2,highpass=f=300:poles=2,lowpass=f=3000:poles=2,lowpass=f=3000:poles=2"
)

// TestDubKeepsTheBedThroughASourceLine dubs real speech over a steady
// music-like bed where the dubbed line is shorter than its source line:
// in the tail of that source line, where the original speaker still talks
// and no dubbed line plays, the soundtrack must keep the bed — within 6 dB
// of the bed alone, overall and in the bands under 250 Hz and over
// 1.5 kHz — while the original speech stays pushed down: what the dub
// track holds there besides the bed (the dub, scaled back by the loudness
// gain, minus the bed, sample by sample) is at least 10 dB under the
// original speech, and the voice band (300–3000 Hz) at least 8 dB under
// the original's.
func TestDubKeepsTheBedThroughASourceLine(t *testing.T) {
	requireTools(t)
	dir := t.TempDir()
	bedFile, speechFile := filepath.Join(dir, "bed.wav"), filepath.Join(dir, "speech.wav")
	d := fmt.Sprint(bedClipMS / 1000)
	ffmpegWAV(t, bedFile, "-filter_complex",
		"sine=f=165:sample_rate=48000:d="+d+",tremolo=f=3:d=0.4,volume=0.05[a];"+
			"sine=f=1760:sample_rate=48000:d="+d+",tremolo=f=5:d=0.4,volume=0.025[b];"+
			"anoisesrc=color=pink:amplitude=0.05:seed=7:sample_rate=48000:d="+d+"[c];"+
			"[a][b][c]amix=inputs=3:normalize=0[out]", "-map", "[out]")
	ffmpegWAV(t, speechFile, "-i", speechtest.Fixture(t, "two_cities.wav"), "-filter_complex",
		fmt.Sprintf("[0:a]atrim=end=12.75,aresample=48000,volume=4,adelay=%d,apad=whole_dur=%s[out]", int(speechAt*1000), d),
		"-map", "[out]")
	bed, speech := readMono(t, bedFile), readMono(t, speechFile)
	frames := min(len(bed), len(speech))
	orig := make([]float64, frames)
	for i := range orig {
		orig[i] = bed[i] + speech[i]
	}
	origFile := filepath.Join(dir, "original.wav")
	writeMono(t, origFile, orig)

	// The first source line (3.2–6.5 s) dubbed by a much shorter line;
	// the others by lines that fit.
	texts := []string{"Era el mejor de los tiempos.", "La edad de la sabiduría.", "La época de la fe.", "La estación de la luz.", "La primavera de la esperanza."}
	var slots []Slot
	for i, text := range texts {
		ms := spanish(t, text, filepath.Join(dir, fmt.Sprintf("clip-%d.wav", i)))
		s := Slot{Idx: i, StartMS: sourceLines[i].StartMS, EndMS: sourceLines[i].EndMS, AudioMS: ms}
		if i+1 < len(texts) {
			s.NextStartMS = sourceLines[i+1].StartMS
		}
		slots = append(slots, s)
	}
	placements := Fit(slots, FitOptions{TotalMS: bedClipMS})
	tailFrom, tailTo := float64(placements[0].EndMS()+duckReleaseMS+50)/1000, float64(sourceLines[0].EndMS-50)/1000
	if tailTo-tailFrom < 0.8 {
		t.Fatalf("the first dubbed line leaves %.2f s of its source line: %+v", tailTo-tailFrom, placements[0])
	}
	clip := func(idx int) string { return filepath.Join(dir, fmt.Sprintf("clip-%d.wav", idx)) }
	out := filepath.Join(dir, "dub.wav")
	rep, err := AssembleDub(context.Background(), DubInput{Placements: placements, Clip: clip, TotalMS: bedClipMS,
		Original: origFile, OriginalChannels: 1, Speech: sourceLines}, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mix: %+v; tail of the first source line without its dub: %.2f–%.2f s", rep, tailFrom, tailTo)

	// The dub track scaled back by the loudness gain, and what it holds
	// besides the bed.
	dub := readMono(t, out)
	back := math.Pow(10, -rep.GainDB/20)
	scaled, rest := make([]float64, frames), make([]float64, frames)
	for i := range frames {
		scaled[i] = dub[i] * back
		rest[i] = scaled[i] - bed[i]
	}
	scaledFile, restFile := filepath.Join(dir, "dub-scaled.wav"), filepath.Join(dir, "dub-minus-bed.wav")
	writeMono(t, scaledFile, scaled)
	writeMono(t, restFile, rest)
	keep(t, origFile, bedFile, out)

	for _, b := range []struct{ name, filter string }{{"all", "anull"}, {"under 250 Hz", lowBand}, {"over 1.5 kHz", highBand}} {
		o, d := bandDB(t, bedFile, b.filter, tailFrom, tailTo), bandDB(t, scaledFile, b.filter, tailFrom, tailTo)
		t.Logf("bed %s in the tail: the bed alone %.1f dB, the dub %.1f dB (%+.1f dB; the dub's loudness gain %+.2f dB taken off)", b.name, o, d, d-o, rep.GainDB)
		if math.Abs(d-o) > 6 {
			t.Errorf("bed %s in the tail %.2f–%.2f s: %.1f dB in the dub, %.1f dB alone: more than 6 dB apart", b.name, tailFrom, tailTo, d, o)
		}
	}
	s, r := bandDB(t, speechFile, "anull", tailFrom, tailTo), bandDB(t, restFile, "anull", tailFrom, tailTo)
	t.Logf("original speech in the tail %.1f dB; what the dub holds there besides the bed %.1f dB (%+.1f dB)", s, r, r-s)
	if r-s > -10 {
		t.Errorf("in the tail %.2f–%.2f s the dub holds %.1f dB besides the bed, the original speech is %.1f dB: want 10 dB less", tailFrom, tailTo, r, s)
	}
	o, v := bandDB(t, origFile, voiceBand, tailFrom, tailTo), bandDB(t, scaledFile, voiceBand, tailFrom, tailTo)
	bv := bandDB(t, bedFile, voiceBand, tailFrom, tailTo)
	t.Logf("voice band 300–3000 Hz in the tail: original %.1f dB, dub %.1f dB (%+.1f dB), the bed alone %.1f dB", o, v, v-o, bv)
	if v-o > -8 {
		t.Errorf("voice band in the tail %.2f–%.2f s: %.1f dB in the dub, %.1f dB in the original: want 8 dB lower", tailFrom, tailTo, v, o)
	}
	// Where nobody speaks the bed is the bed.
	for _, w := range [][2]float64{{0.2, 1.8}, {15.0, 15.9}} {
		o, d := bandDB(t, bedFile, "anull", w[0], w[1]), bandDB(t, scaledFile, "anull", w[0], w[1])
		if math.Abs(d-o) > 0.5 {
			t.Errorf("speech-free %.1f–%.1f s: %.1f dB in the dub, %.1f dB in the original", w[0], w[1], d, o)
		}
	}
}
