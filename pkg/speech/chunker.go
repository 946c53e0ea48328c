package speech

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/dubflow/dubflow/pkg/step"
	"golang.org/x/sync/errgroup"
)

// Chunker is a Transcriber for long audio: it cuts a mono 16-bit PCM WAV
// file into chunks of about ChunkSeconds, each cut placed at the quietest
// 20 ms within a fifth of a chunk of the target, writes each chunk to a
// temporary WAV file, transcribes up to Concurrency chunks at once with
// Engine, and merges the segments in order with their times moved back to
// the whole file's timeline.
//
// The file is streamed: memory holds one chunk (plus the search window)
// at a time, and at most Concurrency+1 chunk files exist at once. Audio
// no longer than a chunk and its window goes to Engine as it is.
type Chunker struct {
	// Engine transcribes the chunks.
	Engine Transcriber
	// ChunkSeconds is the target chunk length; 60 when zero.
	ChunkSeconds int
	// Concurrency bounds the chunks transcribed at once; 2 when zero.
	Concurrency int
	// TempDir holds the chunk files; os.TempDir() when empty.
	TempDir string
}

// Transcribe implements Transcriber.
func (c *Chunker) Transcribe(ctx context.Context, wavPath, language string) ([]Segment, error) {
	f, err := os.Open(wavPath)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", wavPath, err)
	}
	defer f.Close()
	h, err := readWAVHeader(f)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("chunk %s: %w", wavPath, err))
	}
	if h.Channels != 1 || h.BitsPerSample != 16 {
		return nil, step.Permanent(fmt.Errorf("chunk %s: %d channels, %d bit: want mono 16 bit: %w", wavPath, h.Channels, h.BitsPerSample, ErrNotWAV))
	}
	secs := c.ChunkSeconds
	if secs <= 0 {
		secs = 60
	}
	chunk := secs * h.SampleRate // samples
	window := chunk / 5
	if h.DataSize >= 0 && h.DataSize/2 <= int64(chunk+window) {
		return c.Engine.Transcribe(ctx, wavPath, language)
	}
	var data io.Reader = f
	if h.DataSize >= 0 {
		data = io.LimitReader(f, h.DataSize)
	}
	data = bufio.NewReaderSize(data, 64<<10)

	conc := c.Concurrency
	if conc <= 0 {
		conc = 2
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	var mu sync.Mutex
	results := map[int][]Segment{}
	offsets := map[int]int{} // chunk → start in ms

	buf := make([]byte, 0, 2*(chunk+window))
	start := 0 // samples before buf
	n := 0
	for {
		if err := gctx.Err(); err != nil {
			break
		}
		m, rerr := io.ReadFull(data, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		last := rerr != nil // io.EOF or io.ErrUnexpectedEOF: the data ends here
		if rerr != nil && !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
			g.Wait()
			return nil, fmt.Errorf("chunk %s: read: %w", wavPath, rerr)
		}
		buf = buf[:len(buf)&^1]
		if len(buf) == 0 {
			break
		}
		cut := len(buf) / 2
		if !last {
			cut = quietest(buf, chunk-window, chunk+window, h.SampleRate/50)
		}
		path, err := c.writeChunk(buf[:2*cut], h.SampleRate, n)
		if err != nil {
			g.Wait()
			return nil, fmt.Errorf("chunk %s: %w", wavPath, err)
		}
		idx, offsetMS := n, int(int64(start)*1000/int64(h.SampleRate))
		g.Go(func() error {
			defer os.Remove(path)
			segs, err := c.Engine.Transcribe(gctx, path, language)
			if err != nil {
				return fmt.Errorf("transcribe chunk %d at %d ms: %w", idx, offsetMS, err)
			}
			mu.Lock()
			results[idx], offsets[idx] = segs, offsetMS
			mu.Unlock()
			return nil
		})
		n++
		start += cut
		rest := copy(buf, buf[2*cut:])
		buf = buf[:rest]
		if last {
			break
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("chunk %s: %w", wavPath, err)
	}
	var out []Segment
	for i := 0; i < n; i++ {
		off := offsets[i]
		for _, s := range results[i] {
			s.StartMS += off
			s.EndMS += off
			if s.Words != nil {
				ws := make([]Word, len(s.Words))
				for j, w := range s.Words {
					w.StartMS += off
					w.EndMS += off
					ws[j] = w
				}
				s.Words = ws
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// writeChunk writes 16-bit mono samples as a temporary WAV file.
func (c *Chunker) writeChunk(samples []byte, rate, n int) (string, error) {
	f, err := os.CreateTemp(c.TempDir, fmt.Sprintf("dubflow-chunk-%03d-*.wav", n))
	if err != nil {
		return "", fmt.Errorf("create chunk file: %w", err)
	}
	_, err = f.Write(wavHeader(rate, 1, 16, len(samples)))
	if err == nil {
		_, err = f.Write(samples)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write chunk file: %w", err)
	}
	return f.Name(), nil
}

// quietest returns the sample index where buf is best cut: the middle
// of the stretch of quietest 20 ms frames (moving by half frames) whose
// start lies in [lo, hi), so that a cut lands in the middle of a pause
// rather than at its edge. buf holds little-endian 16-bit samples.
func quietest(buf []byte, lo, hi, frame int) int {
	total := len(buf) / 2
	frame = max(frame, 1)
	hop := max(frame/2, 1)
	lo = max(lo, 0)
	hi = min(hi, total-frame)
	if hi <= lo {
		return min(max(lo, 1), total)
	}
	var energy []float64
	for s := lo; s < hi; s += hop {
		var e float64
		for i := s; i < s+frame; i++ {
			v := float64(int16(binary.LittleEndian.Uint16(buf[2*i:])))
			e += v * v
		}
		energy = append(energy, e)
	}
	best := 0
	for i, e := range energy {
		if e < energy[best] {
			best = i
		}
	}
	// Widen to the neighbouring frames that are nearly as quiet
	// (within 50%, or a noise floor of about 1 LSB RMS).
	limit := energy[best]*1.5 + float64(frame)
	first, last := best, best
	for first > 0 && energy[first-1] <= limit {
		first--
	}
	for last < len(energy)-1 && energy[last+1] <= limit {
		last++
	}
	return lo + (first+last)/2*hop + frame/2
}
