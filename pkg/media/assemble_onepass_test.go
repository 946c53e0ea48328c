package media

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// assembleDubOnePass is the assembly AssembleDub replaced, kept as the
// "previous" baseline of BenchmarkAssembleDub: one ffmpeg filter graph
// stretches, places and mixes everything while measuring the loudness
// (rubberband, amultiply with a gain envelope, ebur128), a second ffmpeg
// applies the loudness gain and limits the peaks.
//
// It writes the dub track to out: a 16-bit WAV at 48 kHz, stereo
// when the soundtrack is, lasting exactly TotalMS. Each clip starts at its
// placement's start (to the sample) and is stretched by rubberband when
// its tempo is not 1; the soundtrack is mixed under the voice as
// Mix.Background says; the result is brought to Mix.LoudnessLUFS (EBU R128,
// sample peaks limited to -1.5 dBFS).
//
// However many segments there are, it runs ffmpeg twice: once to stretch,
// place and mix everything in one filter graph while measuring loudness,
// once to apply the loudness gain. The clips are first joined back to back
// into one file, which the filter graph splits again (asegment) only
// around the clips it stretches. Time and memory grow linearly with the
// timeline.
func assembleDubOnePass(ctx context.Context, in DubInput, out string) (*MixReport, error) {
	if err := in.Mix.Validate(); err != nil {
		return nil, fmt.Errorf("assemble dub: %w", err)
	}
	if in.TotalMS < 0 {
		return nil, fmt.Errorf("assemble dub: timeline length %d ms is negative", in.TotalMS)
	}
	outPath, work, err := dubWorkDir(out)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	rate, err := voiceRate(in)
	if err != nil {
		return nil, fmt.Errorf("assemble dub: %w", err)
	}
	voice, err := writeVoice(ctx, in.Placements, in.Clip, rate, 0, in.TotalMS, filepath.Join(work, "voice.wav"))
	if err != nil {
		return nil, fmt.Errorf("assemble dub: %w", err)
	}
	rep, err := in.onePassPlan(ctx, work)
	if err != nil {
		return nil, fmt.Errorf("assemble dub: %w", err)
	}
	rep.Stretched, rep.Pieces = voice.stretched(), len(voice.pieces)
	mixed := filepath.Join(work, "mix.wav")
	if err := onePassMix(ctx, voice, rep, in, work, mixed); err != nil {
		return nil, err
	}
	tmp := filepath.Join(work, "out.wav")
	if err := onePassNormalize(ctx, mixed, rep, tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, outPath); err != nil {
		return nil, fmt.Errorf("assemble dub: %w", err)
	}
	return rep, nil
}

// onePassPlan is plan, then writes the gain
// envelope when the soundtrack is kept.
func (in DubInput) onePassPlan(ctx context.Context, work string) (*MixReport, error) {
	rep, err := in.plan(ctx)
	if err != nil || rep.Background == BackgroundNone {
		return rep, err
	}
	spans := append([]Span(nil), in.Speech...)
	for _, p := range in.Placements {
		spans = append(spans, Span{p.StartMS, p.EndMS()})
	}
	return rep, writeEnvelope(filepath.Join(work, "envelope.wav"), spans, in.TotalMS, rep.DuckDB)
}

// onePassMix runs the one filter graph: voice (input 0), soundtrack (1) and
// envelope (2) into a 32-bit float WAV, measuring its loudness on the way.
func onePassMix(ctx context.Context, v *voiceTrack, rep *MixReport, in DubInput, work, out string) error {
	total := msToFrames(int64(in.TotalMS), mixRate)
	graph := v.graph(rep.Channels)
	args, err := inputArgs(v.path, "wav")
	if err != nil {
		return err
	}
	last := "[voice]"
	if rep.Background != BackgroundNone {
		orig, err := inputArgs(in.Original, "")
		if err != nil {
			return err
		}
		env, err := inputArgs(filepath.Join(work, "envelope.wav"), "wav")
		if err != nil {
			return err
		}
		args = append(append(args, orig...), env...)
		graph += backgroundGraph(rep.Background, rep.Channels, total) + "[voice][bg]amix=inputs=2:normalize=0:duration=first,"
		last = ""
	}
	dual := strconv.FormatBool(rep.Channels == 1)
	graph += last + "ebur128=framelog=verbose:dualmono=" + dual + ",aresample=" + strconv.Itoa(mixRate) +
		",atrim=end_sample=" + strconv.FormatInt(total, 10) + "[out]"
	args = append(args, "-filter_complex", graph, "-map", "[out]", "-c:a", "pcm_f32le")
	args = append(args, outputArgs("wav", "file:"+out)...)
	stderr, err := runFFmpegLog(ctx, "info", args...)
	if err != nil {
		return classifyFFmpegError(in.Original, tail(stderr), fmt.Errorf("assemble dub: mix: %w", err))
	}
	rep.MeasuredLUFS, rep.GainDB, err = loudnessGain(stderr, rep.TargetLUFS)
	if err != nil {
		return fmt.Errorf("assemble dub: %w", err)
	}
	return nil
}

// onePassNormalize applies the loudness gain and limits the peaks, writing
// the 16-bit dub track.
func onePassNormalize(ctx context.Context, mixed string, rep *MixReport, out string) error {
	args, err := inputArgs(mixed, "wav")
	if err != nil {
		return err
	}
	af := "volume=" + strconv.FormatFloat(rep.GainDB, 'f', 2, 64) + "dB,alimiter=limit=" +
		strconv.FormatFloat(peakLimit, 'f', 4, 64) + ":level=false:latency=true"
	args = append(args, "-af", af, "-c:a", "pcm_s16le", "-fflags", "+bitexact")
	args = append(args, outputArgs("wav", "file:"+out)...)
	if stderr, err := runFFmpeg(ctx, args...); err != nil {
		return classifyFFmpegError(mixed, stderr, fmt.Errorf("assemble dub: normalize: %w", err))
	}
	return nil
}

// envelopeRate is the rate of the gain envelope (10 ms steps); ffmpeg
// resamples it smoothly to mixRate.
const envelopeRate = 100

// tail keeps the end of a long info-level log for an error message.
func tail(s string) string {
	if len(s) > 1024 {
		return s[len(s)-1024:]
	}
	return s
}

// writeEnvelope writes the soundtrack's gain over a timeline of totalMS as
// a mono WAV at envelopeRate: 1 outside speech, duckDB under every span,
// with ramps of duckAttackMS before and duckReleaseMS after each span.
func writeEnvelope(path string, spans []Span, totalMS int, duckDB float64) error {
	n := int(msToFrames(int64(totalMS), envelopeRate)) + 1
	gain := make([]float64, n)
	for i := range gain {
		gain[i] = 1
	}
	low := math.Pow(10, duckDB/20)
	step := 1000 / envelopeRate
	for _, s := range spans {
		a, b := s.StartMS/step, (s.EndMS+step-1)/step
		attack, release := duckAttackMS/step, duckReleaseMS/step
		for i := max(a-attack, 0); i < min(b+release, n); i++ {
			g := low
			switch {
			case i < a:
				g = low + (1-low)*float64(a-i)/float64(attack)
			case i >= b:
				g = low + (1-low)*float64(i-b+1)/float64(release)
			}
			gain[i] = min(gain[i], g)
		}
	}
	samples := make([]int16, n)
	for i, g := range gain {
		samples[i] = int16(math.Round(g * 32767))
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write gain envelope: %w", err)
	}
	defer f.Close()
	w, err := NewWAVWriter(f, envelopeRate, 1)
	if err == nil {
		err = w.WriteSamples(samples)
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fmt.Errorf("write gain envelope: %w", err)
	}
	return nil
}

// backgroundGraph returns the filter chains that turn input 1 (the film's
// soundtrack) and input 2 (the gain envelope) into [bg], total samples
// long at mixRate.
func backgroundGraph(mode string, channels int, total int64) string {
	fit := ",apad=whole_len=" + strconv.FormatInt(total, 10) + ",atrim=end_sample=" + strconv.FormatInt(total, 10)
	orig := "[1:a:0]aresample=" + strconv.Itoa(mixRate) + ",aformat=sample_fmts=fltp:channel_layouts=" + layout(channels) + fit
	env := "[2:a:0]aresample=" + strconv.Itoa(mixRate) + ",aformat=sample_fmts=fltp," + toChannels(channels) + fit
	if mode != BackgroundReduceCenter {
		return orig + "[orig];" + env + "[env];[orig][env]amultiply[bg];"
	}
	return orig + ",asplit[o][s];[s]pan=stereo|c0=0.5*c0-0.5*c1|c1=0.5*c1-0.5*c0[side];" +
		env + ",asplit[e1][e2];[e2]aeval=exprs=1-val(0)|1-val(1):channel_layout=stereo[inv];" +
		"[o][e1]amultiply[od];[side][inv]amultiply[sd];[od][sd]amix=inputs=2:normalize=0[bg];"
}

// loudnessGain parses the integrated loudness from ebur128's summary in
// stderr and returns it with the gain that brings it to target.
func loudnessGain(stderr string, target float64) (lufs, gain float64, err error) {
	i := strings.LastIndex(stderr, "Integrated loudness:")
	if i < 0 {
		return 0, 0, fmt.Errorf("loudness: no ebur128 summary in ffmpeg's output")
	}
	f := strings.Fields(stderr[i+len("Integrated loudness:"):])
	if len(f) < 2 || f[0] != "I:" {
		return 0, 0, fmt.Errorf("loudness: unexpected ebur128 summary %q", strings.Join(f[:min(len(f), 4)], " "))
	}
	if lufs, err = strconv.ParseFloat(f[1], 64); err != nil {
		return 0, 0, fmt.Errorf("loudness: %w", err)
	}
	if lufs <= -70 { // ebur128's floor: silence, nothing to normalize
		return lufs, 0, nil
	}
	return lufs, math.Round(min(target-lufs, maxGainDB)*100) / 100, nil
}
