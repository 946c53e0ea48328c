package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// DubSampleRate is the sample rate of the per-segment assembly's track
// (mono, 16-bit).
const DubSampleRate = 24000

// assembleDubPerSegment is the assembly AssembleDub replaced, kept as the
// baseline of BenchmarkAssembleDub: it writes the dub track for a timeline of totalMS milliseconds
// to out as one mono WAV at DubSampleRate. It streams: for each placement,
// in order, silence up to its start, then its clip (clipPath(idx)) played
// at its tempo, resampled, and cut or padded to exactly OutMS; then silence
// to the end. Memory does not grow with the timeline. Placements must be in
// timeline order and must not overlap (Fit guarantees both); a clip that
// runs past totalMS is cut there.
func assembleDubPerSegment(ctx context.Context, placements []Placement, clipPath func(idx int) string, totalMS int, out string) error {
	if totalMS < 0 {
		return fmt.Errorf("assemble dub: timeline length %d ms is negative", totalMS)
	}
	outPath, work, err := dubWorkDir(out)
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	track, err := os.Create(filepath.Join(work, "track.wav"))
	if err != nil {
		return fmt.Errorf("assemble dub: %w", err)
	}
	defer track.Close()
	w, err := NewWAVWriter(track, DubSampleRate, 1)
	if err != nil {
		return fmt.Errorf("assemble dub: %w", err)
	}
	a := legacyAssembler{w: w, clip: filepath.Join(work, "clip.wav"), buf: make([]int16, 16<<10), total: msToFrames(int64(totalMS), DubSampleRate)}
	prevEnd := 0
	for _, p := range placements {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("assemble dub: %w", err)
		}
		if p.StartMS < prevEnd {
			return fmt.Errorf("assemble dub: segment %d starts at %d ms, before the previous one ends (%d ms)", p.Idx, p.StartMS, prevEnd)
		}
		prevEnd = p.EndMS()
		if err := a.place(ctx, p, clipPath(p.Idx)); err != nil {
			return fmt.Errorf("assemble dub: segment %d: %w", p.Idx, err)
		}
	}
	if err := a.silenceTo(a.total); err != nil {
		return fmt.Errorf("assemble dub: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("assemble dub: %w", err)
	}
	if err := track.Close(); err != nil {
		return fmt.Errorf("assemble dub: %w", err)
	}
	if err := os.Rename(track.Name(), outPath); err != nil {
		return fmt.Errorf("assemble dub: %w", err)
	}
	return nil
}

// legacyAssembler holds the state of one assembleDubPerSegment run: the track being
// written, a reusable temporary clip file and one sample buffer.
type legacyAssembler struct {
	w     *WAVWriter
	clip  string
	buf   []int16
	total int64 // timeline length in frames
}

// silenceTo writes silence up to frame (never past the timeline).
func (a *legacyAssembler) silenceTo(frame int64) error {
	frame = min(frame, a.total)
	if gap := frame - a.w.Frames(); gap > 0 {
		return a.w.WriteSilence(gap)
	}
	return nil
}

func (a *legacyAssembler) place(ctx context.Context, p Placement, clip string) error {
	start := msToFrames(int64(p.StartMS), DubSampleRate)
	if err := a.silenceTo(start); err != nil {
		return err
	}
	end := min(msToFrames(int64(p.EndMS()), DubSampleRate), a.total)
	want := end - a.w.Frames()
	if want <= 0 {
		return nil
	}
	if err := renderClip(ctx, clip, p.Tempo, DubSampleRate, a.clip); err != nil {
		return err
	}
	f, err := os.Open(a.clip)
	if err != nil {
		return fmt.Errorf("open rendered clip: %w", err)
	}
	defer f.Close()
	r, err := NewWAVReader(f)
	if err != nil {
		return fmt.Errorf("read rendered clip: %w", err)
	}
	for want > 0 {
		n, err := r.ReadSamples(a.buf[:min(int64(len(a.buf)), want)])
		if n > 0 {
			if werr := a.w.WriteSamples(a.buf[:n]); werr != nil {
				return werr
			}
			want -= int64(n)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read rendered clip: %w", err)
		}
	}
	return a.silenceTo(end) // a clip shorter than OutMS (rounding in atempo) is padded
}
