package media

import (
	"fmt"
	"io"
	"time"
)

// MaxClip bounds what WriteWAVClip copies: a line's audio, never a whole
// recording.
const MaxClip = 5 * time.Minute

// WriteWAVClip writes to w, as a WAV file of its own, the part of the
// 16-bit PCM WAV stream r from from to to (cut to the stream's end and to
// MaxClip), reading only that part: r's header, then a seek to the
// clip's first frame. A stream that is not PCM WAV is ErrNotWAV; a clip
// that starts at or after the stream's end, or is empty, is an error.
func WriteWAVClip(w io.Writer, r io.ReadSeeker, from, to time.Duration) error {
	wr, err := NewWAVReader(r)
	if err != nil {
		return err
	}
	data, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("find the WAV data: %w", err)
	}
	f := wr.Format
	if f.BitsPerSample != 16 {
		return fmt.Errorf("clip %d-bit samples: %w", f.BitsPerSample, ErrNotWAV)
	}
	first, last := durationToFrames(from, f.SampleRate), durationToFrames(min(to, from+MaxClip), f.SampleRate)
	if wr.Frames >= 0 {
		last = min(last, wr.Frames)
	}
	if from < 0 || last <= first {
		return fmt.Errorf("clip %s–%s of a %s recording: nothing to play", from, to, wr.Duration())
	}
	if _, err := r.Seek(data+first*int64(f.frameBytes()), io.SeekStart); err != nil {
		return fmt.Errorf("seek to %s: %w", from, err)
	}
	out := &WAVWriter{format: f, bytes: (last - first) * int64(f.frameBytes())}
	if _, err := w.Write(out.header()); err != nil {
		return fmt.Errorf("write the clip: %w", err)
	}
	if _, err := io.CopyN(w, r, out.bytes); err != nil && err != io.EOF {
		return fmt.Errorf("write the clip: %w", err)
	}
	return nil
}

// durationToFrames is d in frames at rate.
func durationToFrames(d time.Duration, rate int) int64 {
	return int64(d) * int64(rate) / int64(time.Second)
}
