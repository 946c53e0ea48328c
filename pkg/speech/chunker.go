package speech

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/dubflow/dubflow/pkg/fault"
	"golang.org/x/sync/errgroup"
)

// Chunker is a Transcriber for long audio: it cuts a mono 16-bit PCM WAV
// file into even chunks of at most about ChunkSeconds, each cut placed at the quietest
// 20 ms within a fifth of a chunk of the target, writes each chunk to a
// temporary WAV file, transcribes up to Concurrency chunks at once with
// Engine, and merges the segments in order with their times moved back to
// the whole file's timeline.
//
// Each chunk after the first also starts with the LeadSeconds of audio
// before its cut, decoded again only to warm the engine up (pocketsphinx
// adapts its feature normalization over the first seconds of a file: without
// a lead-in the start of every chunk is recognized worse); what the engine
// hears in that lead-in is dropped, as it belongs to the chunk before.
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
	// LeadSeconds is the warm-up audio before each cut; 5 when zero, none
	// when negative.
	LeadSeconds int
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
		return nil, fault.Permanent(fmt.Errorf("chunk %s: %w", wavPath, err))
	}
	if h.Channels != 1 || h.BitsPerSample != 16 {
		return nil, fault.Permanent(fmt.Errorf("chunk %s: %d channels, %d bit: want mono 16 bit: %w", wavPath, h.Channels, h.BitsPerSample, ErrNotWAV))
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
	if total := int(h.DataSize / 2); total > 0 {
		// Even chunks: 44 s in 30 s chunks is two of 22 s, not 30 + 14,
		// so that concurrent chunks finish together.
		parts := (total + chunk - 1) / chunk
		chunk = (total + parts - 1) / parts
		window = chunk / 5
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
	offsets := map[int]int{} // chunk → start of its file in ms
	leads := map[int]int{}   // chunk → lead-in to drop, in ms
	leadSamples := c.LeadSeconds * h.SampleRate
	if c.LeadSeconds == 0 {
		leadSamples = 5 * h.SampleRate
	}
	leadSamples = max(leadSamples, 0)
	tail := make([]byte, 0, 2*leadSamples) // the lead-in of the next chunk

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
		path, err := c.writeChunk(tail, buf[:2*cut], h.SampleRate, n)
		if err != nil {
			g.Wait()
			return nil, fmt.Errorf("chunk %s: %w", wavPath, err)
		}
		leadMS := int(int64(len(tail)/2) * 1000 / int64(h.SampleRate))
		idx, offsetMS := n, int(int64(start)*1000/int64(h.SampleRate))-leadMS
		g.Go(func() error {
			defer os.Remove(path)
			segs, err := c.Engine.Transcribe(gctx, path, language)
			if err != nil {
				return fmt.Errorf("transcribe chunk %d at %d ms: %w", idx, offsetMS, err)
			}
			mu.Lock()
			results[idx], offsets[idx], leads[idx] = segs, offsetMS, leadMS
			mu.Unlock()
			return nil
		})
		n++
		start += cut
		keep := min(leadSamples, cut)
		tail = append(tail[:0], buf[2*(cut-keep):2*cut]...)
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
			var ok bool
			if s, ok = dropLead(s, leads[i]); !ok {
				continue
			}
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
// dropLead removes from s what the engine heard in a chunk's lead-in (the
// first leadMS ms, which the chunk before transcribed): the words that start
// there, or without word timings the whole segment if its middle is there.
// It reports whether anything is left.
func dropLead(s Segment, leadMS int) (Segment, bool) {
	if leadMS <= 0 {
		return s, true
	}
	if len(s.Words) == 0 {
		return s, (s.StartMS+s.EndMS)/2 >= leadMS
	}
	if s.Words[0].StartMS >= leadMS {
		return s, true
	}
	var kept []Word
	for _, w := range s.Words {
		if w.StartMS >= leadMS {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		return Segment{}, false
	}
	texts := make([]string, len(kept))
	for i, w := range kept {
		texts[i] = w.Text
	}
	s.Words, s.StartMS, s.Text = kept, kept[0].StartMS, strings.Join(texts, " ")
	return s, true
}

// writeChunk writes lead followed by samples as chunk n's WAV file.
func (c *Chunker) writeChunk(lead, samples []byte, rate, n int) (string, error) {
	f, err := os.CreateTemp(c.TempDir, fmt.Sprintf("dubflow-chunk-%03d-*.wav", n))
	if err != nil {
		return "", fmt.Errorf("create chunk file: %w", err)
	}
	_, err = f.Write(wavHeader(rate, 1, 16, len(lead)+len(samples)))
	if err == nil {
		_, err = f.Write(lead)
	}
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
