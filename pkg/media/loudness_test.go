package media

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// TestLoudnessMeterMatchesEbur128 measures speech over a tone, mono and
// stereo, with the Go meter and with ffmpeg's ebur128: the integrated
// loudness agrees within 0.2 LU.
func TestLoudnessMeterMatchesEbur128(t *testing.T) {
	requireTools(t)
	jfk := speechtest.Fixture(t, "jfk.wav")
	for _, channels := range []int{1, 2} {
		graph := "[0:a]aresample=48000,aformat=sample_fmts=flt:channel_layouts=" + layout(channels) + "[s];" +
			"sine=f=220:sample_rate=48000:d=11,volume=0.05,aformat=sample_fmts=flt:channel_layouts=" + layout(channels) + "[t];" +
			"[s][t]amix=inputs=2:normalize=0,asplit[a][b];[b]ebur128=dualmono=true,anullsink"
		cmd := exec.Command("ffmpeg", "-nostdin", "-hide_banner", "-nostats", "-i", jfk, "-filter_complex", graph,
			"-map", "[a]", "-f", "f32le", "-")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		raw, err := cmd.Output()
		if err != nil {
			t.Fatalf("ffmpeg: %v: %s", err, stderr.String())
		}
		want, err := parseIntegrated(stderr.String())
		if err != nil {
			t.Fatal(err)
		}
		samples := make([]float32, len(raw)/4)
		if err := newSampleReader(bytes.NewReader(raw), 32).read(samples); err != nil {
			t.Fatal(err)
		}
		m := newLoudnessMeter(channels, int64(len(samples)/channels))
		m.add(samples)
		got := m.integrated()
		t.Logf("%d channels: Go meter %.2f LUFS, ebur128 %.2f LUFS", channels, got, want)
		if math.Abs(got-want) > 0.2 {
			t.Errorf("%d channels: integrated loudness %.2f LUFS, ebur128 says %.2f", channels, got, want)
		}
	}
	if got := newLoudnessMeter(1, 0).integrated(); !math.IsInf(got, -1) || gainTo(max(got, -70), -16) != 0 {
		t.Errorf("silence: %v LUFS, gain %v", got, gainTo(max(got, -70), -16))
	}
}

// parseIntegrated reads the integrated loudness from ebur128's summary.
func parseIntegrated(stderr string) (float64, error) {
	i := strings.LastIndex(stderr, "Integrated loudness:")
	if i < 0 {
		return 0, fmt.Errorf("no ebur128 summary: %s", stderr)
	}
	var lufs float64
	_, err := fmt.Sscan(strings.Fields(stderr[i+len("Integrated loudness:"):])[1], &lufs)
	return lufs, err
}

// TestLimiter feeds peaks far over the limit among quiet samples: nothing
// leaves above the limit, every frame comes out once, in order, delayed by
// look-1 frames, and a stretch far from any peak passes unchanged.
func TestLimiter(t *testing.T) {
	const channels, look, frames = 2, 240, 96000
	in := make([]float32, frames*channels)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range in {
		in[i] = float32(rng.NormFloat64() * 0.05)
	}
	for _, at := range []int{1000, 1001, 5000, 20000, 20100} {
		in[at*channels] = 1.9
		in[at*channels+1] = -3
	}
	l := newLimiter(channels, peakLimit, look, 2400)
	var out []float32
	buf := make([]float32, len(in))
	for from := 0; from < len(in); from += 4800 * channels { // in blocks, as normalizePass feeds it
		n := l.process(in[from:min(from+4800*channels, len(in))], buf)
		out = append(out, buf[:n*channels]...)
	}
	n := l.process(make([]float32, (look-1)*channels), buf)
	out = append(out, buf[:n*channels]...)
	if len(out) != len(in) {
		t.Fatalf("%d samples out, %d in", len(out), len(in))
	}
	for i, s := range out {
		if math.Abs(float64(s)) > peakLimit+1e-6 {
			t.Fatalf("sample %d at %v: over the limit %v", i, s, peakLimit)
		}
	}
	for i := 80000 * channels; i < 90000*channels; i++ { // far from the peaks: untouched
		if out[i] != in[i] {
			t.Fatalf("sample %d changed from %v to %v far from any peak", i, in[i], out[i])
		}
	}
	if g := out[1000*channels+1] / in[1000*channels+1]; math.Abs(float64(g)-peakLimit/3) > 1e-3 {
		t.Errorf("gain at the peak %v, want %v", g, peakLimit/3)
	}
}

// BenchmarkLimiter runs a minute of mono noise, a peak every second,
// through the limiter in normalizePass's blocks.
func BenchmarkLimiter(b *testing.B) {
	in := make([]float32, 60*mixRate)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range in {
		in[i] = float32(rng.NormFloat64() * 0.1)
		if i%mixRate == 0 {
			in[i] = 1.5
		}
	}
	out := make([]float32, mixBlock)
	for b.Loop() {
		l := newLimiter(1, peakLimit, limiterAttackFrames, limiterReleaseFrames)
		for at := 0; at < len(in); at += mixBlock {
			l.process(in[at:at+mixBlock], out)
		}
	}
}
