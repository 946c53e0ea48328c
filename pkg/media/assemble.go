package media

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// DubInput is what AssembleDub mixes.
type DubInput struct {
	// Placements are Fit's, in timeline order, not overlapping.
	Placements []Placement
	// Clip returns the path of segment idx's WAV clip.
	Clip func(idx int) string
	// TotalMS is the length of the timeline (the video).
	TotalMS int
	// Original is the media file whose first audio stream is the film's
	// soundtrack; "" when there is none.
	Original string
	// OriginalChannels is the channel count of that stream when the
	// caller knows it (from Probe); 0 has AssembleDub probe Original.
	OriginalChannels int
	// Speech are the source lines: the soundtrack is ducked under them
	// as well as under the dubbed lines.
	Speech []Span
	// Mix says how the soundtrack and the voice are mixed.
	Mix MixOptions
}

// AssembleDub writes the dub track to out: a 16-bit WAV at 48 kHz, stereo
// when the soundtrack is, lasting exactly TotalMS. Each clip starts at its
// placement's start (to the sample) and is stretched by rubberband when
// its tempo is not 1; the soundtrack is mixed under the voice as
// Mix.Background says; the result is brought to Mix.LoudnessLUFS (EBU R128,
// sample peaks limited to -1.5 dBFS).
//
// The work is spread over the cores and grows linearly with the timeline,
// whatever the number of segments. The timeline is cut, in the silence
// between lines, into up to GOMAXPROCS stretches (fewer when little is to
// be stretched); for each at once, Go joins the clips into one file and
// one ffmpeg stretches the clips that need it and resamples to 48 kHz.
// Meanwhile one ffmpeg decodes the soundtrack. Go mixes the voice over
// the soundtrack with the ducking gain while measuring the loudness, then
// applies the loudness gain and the peak limiter in a second pass over
// the mix. Memory does not grow with the timeline: the passes stream
// through files in the output's folder.
func AssembleDub(ctx context.Context, in DubInput, out string) (*MixReport, error) {
	if err := in.check(); err != nil {
		return nil, fmt.Errorf("assemble dub: %w", err)
	}
	outPath, work, err := dubWorkDir(out)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	rep, err := in.plan(ctx)
	if err != nil {
		return nil, fmt.Errorf("assemble dub: %w", err)
	}
	rate, err := voiceRate(in)
	if err != nil {
		return nil, fmt.Errorf("assemble dub: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cores := runtime.GOMAXPROCS(0)
	parts := splitVoice(in.Placements, in.TotalMS, cores)
	if p := parts[0]; rep.Background != BackgroundNone && len(parts) == 1 && in.TotalMS <= sharedSoundtrackMaxMS &&
		len(p.placements) > 0 && p.frames() > 0 && p.fromMS == 0 {
		p.soundtrack = &sharedSoundtrack{original: in.Original, channels: rep.Channels, raw: filepath.Join(work, "soundtrack.raw")}
	}
	voice := startVoice(ctx, in, parts, rate, cores, work)
	defer voice.wait() // after cancel: no ffmpeg writes into work once it is removed
	defer cancel()
	var bg *ffmpegStream
	if rep.Background != BackgroundNone {
		if bg, err = voice.sharedSoundtrack(ctx); err != nil {
			return nil, fmt.Errorf("assemble dub: %w", err)
		}
		if bg == nil {
			if bg, err = startSoundtrack(ctx, in.Original, rep.Channels, msToFrames(int64(in.TotalMS), mixRate)); err != nil {
				return nil, fmt.Errorf("assemble dub: soundtrack: %w", err)
			}
		}
		defer bg.Abort()
	}
	mixed := filepath.Join(work, "mix.f32")
	if err := mixPass(ctx, voice, bg, rep, in, mixed); err != nil {
		return nil, err
	}
	rep.Stretched, rep.Pieces = voice.stretched, voice.pieces
	tmp := filepath.Join(work, "out.wav")
	if err := normalizePass(ctx, mixed, rep, msToFrames(int64(in.TotalMS), mixRate), tmp); err != nil {
		return nil, fmt.Errorf("assemble dub: normalize: %w", err)
	}
	if err := os.Rename(tmp, outPath); err != nil {
		return nil, fmt.Errorf("assemble dub: %w", err)
	}
	return rep, nil
}

// dubWorkDir checks out, the dub's output path, and makes a work folder
// beside it (the same file system, so that the finished file is renamed into
// place); the caller removes the folder.
func dubWorkDir(out string) (outPath, work string, err error) {
	outURL, err := localOutput(out)
	if err != nil {
		return "", "", err
	}
	outPath = strings.TrimPrefix(outURL, "file:")
	work, err = os.MkdirTemp(filepath.Dir(outPath), ".dub-*")
	if err != nil {
		return "", "", fmt.Errorf("assemble dub: %w", err)
	}
	return outPath, work, nil
}

// check reports options out of range and placements out of order.
func (in DubInput) check() error {
	if err := in.Mix.Validate(); err != nil {
		return err
	}
	if in.TotalMS < 0 {
		return fmt.Errorf("timeline length %d ms is negative", in.TotalMS)
	}
	prevEnd := 0
	for _, p := range in.Placements {
		if p.StartMS < prevEnd {
			return fmt.Errorf("segment %d starts at %d ms, before the previous one ends (%d ms)", p.N, p.StartMS, prevEnd)
		}
		prevEnd = max(p.EndMS(), p.StartMS)
	}
	return nil
}

// plan decides the mode and channels of the mix.
func (in DubInput) plan(ctx context.Context) (*MixReport, error) {
	o := in.Mix.withDefaults()
	rep := &MixReport{Background: o.Background, DuckDB: o.DuckDB, Channels: 1, SampleRate: mixRate, TargetLUFS: o.LoudnessLUFS}
	if in.Original == "" || o.Background == BackgroundNone {
		rep.Background, rep.DuckDB = BackgroundNone, 0
		return rep, nil
	}
	channels := in.OriginalChannels
	if channels <= 0 {
		info, err := Probe(ctx, in.Original)
		if err != nil {
			return nil, fmt.Errorf("soundtrack: %w", err)
		}
		audio := info.StreamsOf(AudioStream)
		if len(audio) == 0 {
			rep.Background, rep.DuckDB = BackgroundNone, 0
			return rep, nil
		}
		channels = audio[0].Channels
	}
	rep.Channels = min(max(channels, 1), 2)
	if rep.Channels < 2 && rep.Background == BackgroundReduceCenter {
		rep.Background = BackgroundDuck
	}
	return rep, nil
}

// startSoundtrack starts decoding the first audio stream of original to
// frames of 16-bit samples at mixRate in channels, exactly frames long.
func startSoundtrack(ctx context.Context, original string, channels int, frames int64) (*ffmpegStream, error) {
	args, err := inputArgs(original, "")
	if err != nil {
		return nil, err
	}
	args = append(args, "-map", "0:a:0", "-af", soundtrackFilter(channels, frames), "-c:a", "pcm_s16le")
	return startFFmpeg(ctx, append(args, outputArgs("s16le", "pipe:1")...)...)
}

// soundtrackFilter brings a soundtrack to 16-bit samples at mixRate in
// channels, exactly frames long.
func soundtrackFilter(channels int, frames int64) string {
	n := strconv.FormatInt(frames, 10)
	return "aresample=" + strconv.Itoa(mixRate) + ",aformat=sample_fmts=s16:channel_layouts=" + layout(channels) +
		",apad=whole_len=" + n + ",atrim=end_sample=" + n
}

// layout is the channel layout name ffmpeg uses for 1 or 2 channels.
func layout(channels int) string {
	if channels == 2 {
		return "stereo"
	}
	return "mono"
}

// mixBlock is how many frames the passes handle at a time: 100 ms.
const mixBlock = mixRate / 10

// mixPass mixes the voice over the soundtrack (bg, nil without one) into
// a raw file of 32-bit float frames, measuring its loudness.
func mixPass(ctx context.Context, voice *voiceStream, bg *ffmpegStream, rep *MixReport, in DubInput, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("assemble dub: %w", err)
	}
	defer f.Close()
	w := newFloatWriter(f)
	ch, total := rep.Channels, msToFrames(int64(in.TotalMS), mixRate)
	meter := newLoudnessMeter(ch, total)
	v, m := make([]float32, mixBlock), make([]float32, mixBlock*ch)
	var soundtrack *soundtrackStage
	if bg != nil {
		duck := newSpectralDucker(in, ch, rep.DuckDB, rep.Background == BackgroundReduceCenter)
		soundtrack = startSoundtrackStage(ctx, newSampleReader(bg, 16), duck, ch, total)
	}
	for at := int64(0); at < total; at += mixBlock {
		n := int(min(mixBlock, total-at))
		if err := voice.read(ctx, v[:n]); err != nil {
			return fmt.Errorf("assemble dub: voice: %w", err)
		}
		if soundtrack == nil {
			for i := range n {
				for c := range ch {
					m[i*ch+c] = v[i]
				}
			}
		} else if b, err := soundtrack.read(n, ch); err != nil {
			return classifyFFmpegError(in.Original, bg.stderr.String(), fmt.Errorf("assemble dub: soundtrack: %w", err))
		} else {
			for i, x := range v[:n] {
				for c := range ch {
					m[i*ch+c] = x + b[i*ch+c]
				}
			}
		}
		meter.add(m[:n*ch])
		if err := w.write(m[:n*ch]); err != nil {
			return fmt.Errorf("assemble dub: %w", err)
		}
	}
	if bg != nil {
		if err := bg.Wait(); err != nil {
			return classifyFFmpegError(in.Original, bg.stderr.String(), fmt.Errorf("assemble dub: soundtrack: %w", err))
		}
	}
	rep.MeasuredLUFS = max(meter.integrated(), -70)
	rep.GainDB = gainTo(rep.MeasuredLUFS, rep.TargetLUFS)
	if err := w.flush(); err != nil {
		return fmt.Errorf("assemble dub: %w", err)
	}
	return f.Close()
}

// soundtrackStage reads the decoded soundtrack through the spectral
// ducker, which runs in a goroutine of its own: it is the mix's heaviest
// part, and the mix's other work goes on meanwhile on another core.
type soundtrackStage struct {
	blocks <-chan []float32
	err    error // set before blocks is closed
	ready  []float32
	at     int // read position in ready
}

// startSoundtrackStage starts reading total frames of ch channels from r
// through duck.
func startSoundtrackStage(ctx context.Context, r *sampleReader, duck *spectralDucker, ch int, total int64) *soundtrackStage {
	blocks := make(chan []float32, 8)
	s := &soundtrackStage{blocks: blocks}
	go func() {
		defer close(blocks)
		send := func(b []float32) bool {
			select {
			case blocks <- append([]float32(nil), b...):
				return true
			case <-ctx.Done():
				s.err = ctx.Err()
				return false
			}
		}
		buf := make([]float32, mixBlock*ch)
		for taken := int64(0); taken < total; {
			k := int(min(mixBlock, total-taken))
			if err := r.read(buf[:k*ch]); err != nil {
				s.err = err
				return
			}
			taken += int64(k)
			if !send(duck.process(buf[:k*ch])) {
				return
			}
		}
		send(duck.process(nil))
	}()
	return s
}

// read returns the next n processed frames (interleaved); the slice is
// reused by the next call.
func (s *soundtrackStage) read(n, ch int) ([]float32, error) {
	if s.at > 0 && s.at >= len(s.ready)/2 {
		s.ready, s.at = s.ready[:copy(s.ready, s.ready[s.at:])], 0
	}
	for len(s.ready)-s.at < n*ch {
		b, ok := <-s.blocks
		if !ok {
			if s.err != nil {
				return nil, s.err
			}
			return nil, fmt.Errorf("the spectral ducker gave back fewer frames than it took")
		}
		s.ready = append(s.ready, b...)
	}
	b := s.ready[s.at : s.at+n*ch]
	s.at += n * ch
	return b, nil
}

// Limiter timing: alimiter's defaults.
const (
	limiterAttackFrames  = 5 * mixRate / 1000
	limiterReleaseFrames = 50 * mixRate / 1000
)

// normalizePass applies the loudness gain to the total frames of the mix
// and limits their peaks, writing the 16-bit dub track.
func normalizePass(ctx context.Context, mixed string, rep *MixReport, total int64, out string) error {
	in, err := os.Open(mixed)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	ch := rep.Channels
	w, err := NewWAVWriter(f, mixRate, ch)
	if err != nil {
		return err
	}
	r, gain := newSampleReader(in, 32), float32(math.Pow(10, rep.GainDB/20))
	lim := newLimiter(ch, peakLimit, limiterAttackFrames, limiterReleaseFrames)
	buf, limited, samples := make([]float32, mixBlock*ch), make([]float32, mixBlock*ch), make([]int16, mixBlock*ch)
	emit := func(n int) error {
		for i, s := range limited[:n*ch] {
			samples[i] = toInt16(s)
		}
		return w.WriteSamples(samples[:n*ch])
	}
	for at := int64(0); at < total; at += mixBlock {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(mixBlock, total-at))
		if err := r.read(buf[:n*ch]); err != nil {
			return fmt.Errorf("read mix: %w", err)
		}
		for i := range buf[:n*ch] {
			buf[i] *= gain
		}
		if err := emit(lim.process(buf[:n*ch], limited)); err != nil {
			return err
		}
	}
	flush := buf[:(limiterAttackFrames-1)*ch] // the end: empty the limiter's delay line
	clear(flush)
	if err := emit(lim.process(flush, limited)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}
