package speech

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/dubflow/dubflow/pkg/cores"
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
//
// Split exposes the cutting alone, so that the chunks can be transcribed
// elsewhere (the asr step fans them out as parts) and placed back on the
// timeline with Chunk.Place.
type Chunker struct {
	// Engine transcribes the chunks.
	Engine Transcriber
	// ChunkSeconds is the target chunk length; 60 when zero.
	ChunkSeconds int
	// Concurrency bounds the chunks transcribed at once; the cores this
	// process sees (cores.Usable) when zero.
	Concurrency int
	// LeadSeconds is the warm-up audio before each cut; 5 when zero, none
	// when negative.
	LeadSeconds int
	// TempDir holds the chunk files; os.TempDir() when empty.
	TempDir string
	// Nice (1..19), when set, is the niceness TranscribeChunk decodes a
	// long recording's chunks at (Yielding); 0 keeps the worker's.
	Nice int
}

// Chunk is one piece of audio that Split cut: a temporary WAV file holding
// the lead-in and then the chunk's own samples.
type Chunk struct {
	// Index counts the chunks from 0, in order.
	Index int
	// Path is the chunk's WAV file; the callback of Split owns it.
	Path string
	// OffsetMS is where the file starts on the whole file's timeline.
	OffsetMS int
	// LeadMS is how much of the file's start is lead-in, heard by the
	// chunk before.
	LeadMS int
}

// Transcribe implements Transcriber.
func (c *Chunker) Transcribe(ctx context.Context, wavPath, language string) ([]Segment, error) {
	whole, err := c.Whole(wavPath)
	if err != nil {
		return nil, err
	}
	if whole {
		return c.Engine.Transcribe(ctx, wavPath, language)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.concurrency())
	var results []*[]Segment // one slot per chunk, filled by its goroutine
	err = c.Split(gctx, wavPath, func(ch Chunk) error {
		slot := new([]Segment)
		results = append(results, slot)
		g.Go(func() error {
			defer os.Remove(ch.Path)
			segs, err := c.TranscribeChunk(gctx, ch, language)
			*slot = segs
			return err
		})
		return nil
	})
	if werr := g.Wait(); werr != nil {
		return nil, werr
	}
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("chunk %s: %w", wavPath, err)
	}
	var out []Segment
	for _, segs := range results {
		out = append(out, *segs...)
	}
	return out, nil
}

// Whole reports whether the audio in wavPath is short enough to be
// transcribed whole, without cutting.
func (c *Chunker) Whole(wavPath string) (bool, error) {
	f, h, err := openMonoWAV(wavPath)
	if err != nil {
		return false, err
	}
	f.Close()
	return h.DataSize >= 0 && c.parts(int(h.DataSize/2), h.SampleRate) == 1, nil
}

// minChunkSeconds is the shortest chunk audio is cut into to be
// transcribed in parallel: each chunk costs the engine's start-up and a
// lead-in (pocketsphinx: ~0.85 CPU-s and 5 s of audio decoded again).
const minChunkSeconds = 20

// parts is how many even chunks total samples are cut into: enough that
// none is longer than ChunkSeconds (a fifth more for a single chunk), and
// at least Concurrency of no less than minChunkSeconds each, so that
// audio a little longer than two such chunks is still transcribed on
// several cores (44 s in 60 s chunks: two of 22 s). More chunks than
// Concurrency are rounded up to a multiple of it while they stay at
// least minChunkSeconds long: Concurrency chunks run at once, so 9 even
// chunks two at a time end with one chunk alone on one core, where 10
// smaller ones end together.
func (c *Chunker) parts(total, rate int) int {
	chunk, parts, conc := c.seconds()*rate, 1, c.concurrency()
	if total > chunk+chunk/5 {
		parts = (total + chunk - 1) / chunk
	}
	if parts > conc {
		if whole := (parts + conc - 1) / conc * conc; total/whole >= minChunkSeconds*rate {
			parts = whole
		}
	}
	return max(parts, min(conc, total/(minChunkSeconds*rate)))
}

// taper cuts the last Concurrency of parts chunks of chunk samples into
// twice as many of half the length, when those are still at least
// minChunkSeconds long: chunks are decoded Concurrency at a time as the
// ones before end, and how long one takes varies with its speech (a
// minute of the two_cities fixture: 10–21 s), so the last ones to start
// end apart, one core idle meanwhile; shorter last chunks bound that
// time. It returns how many full chunks come first and the length of the
// shorter ones (0 when they are not cut).
func (c *Chunker) taper(parts, chunk, rate int) (full, half int) {
	conc := c.concurrency()
	if parts <= conc || chunk/2 < minChunkSeconds*rate {
		return parts, 0
	}
	return parts - conc, chunk / 2
}

// head cuts the first chunk and a quarter of parts chunks of chunk samples
// into Concurrency chunks decoded at once, when there are more chunks than
// that and those are still at least minChunkSeconds long: the start of the
// recording is then transcribed first, a little past its first chunk (a
// growing stream's first stretch ends at the last line that starts before
// what is transcribed, so its first minute plays as soon as those lines are
// spoken again, issue 53), for one more lead-in. It returns how many head
// chunks there are and their length (0, 0: none).
func (c *Chunker) head(parts, chunk, rate int) (heads, length int) {
	conc := c.concurrency()
	length = (chunk + chunk/4) / max(conc, 1)
	if parts <= conc || conc < 2 || length < minChunkSeconds*rate {
		return 0, 0
	}
	return conc, length
}

// Split cuts the audio in wavPath into chunks and hands each to fn in
// order as soon as its file is written; fn owns the file. Split stops at
// the first error of fn or ctx. A file no longer than one chunk is still
// handed over as one chunk (use Whole to avoid the copy).
func (c *Chunker) Split(ctx context.Context, wavPath string, fn func(Chunk) error) error {
	f, h, err := openMonoWAV(wavPath)
	if err != nil {
		return err
	}
	defer f.Close()
	s := c.newSplitter(f, h)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("chunk %s: %w", wavPath, err)
		}
		ch, ok, err := s.next()
		if err != nil {
			return fmt.Errorf("chunk %s: %w", wavPath, err)
		}
		if !ok {
			return nil
		}
		if err := fn(ch); err != nil {
			return err
		}
	}
}

// openMonoWAV opens a mono 16-bit WAV file positioned at its samples.
func openMonoWAV(wavPath string) (*os.File, wavFormat, error) {
	f, err := os.Open(wavPath)
	if err != nil {
		return nil, wavFormat{}, fmt.Errorf("chunk %s: %w", wavPath, err)
	}
	h, err := readWAVHeader(f)
	if err != nil {
		f.Close()
		return nil, h, fault.Permanent(fmt.Errorf("chunk %s: %w", wavPath, err))
	}
	if h.Channels != 1 || h.BitsPerSample != 16 {
		f.Close()
		return nil, h, fault.Permanent(fmt.Errorf("chunk %s: %d channels, %d bit: want mono 16 bit: %w", wavPath, h.Channels, h.BitsPerSample, ErrNotWAV))
	}
	return f, h, nil
}

func (c *Chunker) seconds() int {
	if c.ChunkSeconds <= 0 {
		return 60
	}
	return c.ChunkSeconds
}

func (c *Chunker) concurrency() int {
	if c.Concurrency <= 0 {
		return cores.Usable()
	}
	return c.Concurrency
}

// splitter streams the samples of one file into chunks.
type splitter struct {
	c             *Chunker
	data          io.Reader
	rate          int
	chunk, window int // samples
	// even: the chunks are no more than Concurrency, decoded at once, so
	// cuts go into a long pause near their targets (quietest).
	even bool
	// full chunks come first; with half > 0 the audio after them is cut
	// into chunks of half as many samples (see taper). With heads > 0 the
	// first of the full chunks is cut into heads chunks of head samples
	// (see head).
	full, half  int
	heads, head int
	lead        int    // samples of lead-in before each cut
	buf, tail   []byte // samples not cut yet; the next chunk's lead-in
	start, n    int    // samples before buf; chunks written
	done        bool
}

func (c *Chunker) newSplitter(f *os.File, h wavFormat) *splitter {
	chunk, even := c.seconds()*h.SampleRate, false
	full, half, heads, head := 0, 0, 0, 0
	if total := int(h.DataSize / 2); h.DataSize >= 0 && total > 0 {
		// Even chunks: 100 s in 60 s chunks is two of 50 s, not 60 + 40,
		// so that concurrent chunks finish together.
		parts := c.parts(total, h.SampleRate)
		chunk, even = (total+parts-1)/parts, parts <= c.concurrency()
		full, half = c.taper(parts, chunk, h.SampleRate)
		heads, head = c.head(parts, chunk, h.SampleRate)
	}
	var data io.Reader = f
	if h.DataSize >= 0 {
		data = io.LimitReader(f, h.DataSize)
	}
	lead := c.LeadSeconds * h.SampleRate
	if c.LeadSeconds == 0 {
		lead = 5 * h.SampleRate
	}
	lead = max(lead, 0)
	// The buffer reaches the furthest cut: the next target is at most one
	// window beyond a chunk from the last cut, the cut one more window.
	return &splitter{c: c, data: bufio.NewReaderSize(data, 64<<10), rate: h.SampleRate,
		chunk: chunk, window: chunk / 5, even: even, full: full, half: half, heads: heads, head: head, lead: lead,
		buf: make([]byte, 0, 2*(chunk+2*(chunk/5))), tail: make([]byte, 0, 2*lead)}
}

// target is where the next chunk ends on the whole timeline, in samples,
// and the window its cut may move within: the n-th of the planned chunks
// (head chunks, full ones, then the shorter last ones).
func (s *splitter) target() (int, int) {
	if s.n < s.heads {
		return (s.n + 1) * s.head, s.head / 5
	}
	m := s.n // the full chunk this is, counting the heads as the first
	if s.heads > 0 {
		m = s.n - s.heads + 1
	}
	if s.half > 0 && m >= s.full {
		return s.full*s.chunk + (m-s.full+1)*s.half, s.half / 5
	}
	return (m + 1) * s.chunk, s.window
}

// next writes the next chunk's file; ok is false when the samples ended.
func (s *splitter) next() (Chunk, bool, error) {
	if s.done {
		return Chunk{}, false, nil
	}
	m, rerr := io.ReadFull(s.data, s.buf[len(s.buf):cap(s.buf)])
	s.buf = s.buf[:len(s.buf)+m]
	last := rerr != nil // io.EOF or io.ErrUnexpectedEOF: the data ends here
	if last && !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
		return Chunk{}, false, fmt.Errorf("read: %w", rerr)
	}
	s.buf = s.buf[:len(s.buf)&^1]
	if len(s.buf) == 0 {
		s.done = true
		return Chunk{}, false, nil
	}
	// Aim at the n+1-th chunk's end on the whole timeline, not a chunk
	// after the last cut: cuts that each land late in their window would
	// otherwise add up and leave fewer, longer chunks than planned (10
	// minutes in 60 s chunks: nine of 66 s).
	target, window := s.target()
	target -= s.start
	cut := len(s.buf) / 2
	if !last || cut > target+window {
		// More than this chunk is left, even where the data has ended (the
		// last short chunks fit in the buffer together).
		cut, last = quietest(s.buf, target-window, target+window, s.rate/50, s.even), false
	}
	path, err := s.c.writeChunk(s.tail, s.buf[:2*cut], s.rate, s.n)
	if err != nil {
		return Chunk{}, false, err
	}
	leadMS := int(int64(len(s.tail)/2) * 1000 / int64(s.rate))
	ch := Chunk{Index: s.n, Path: path, LeadMS: leadMS,
		OffsetMS: int(int64(s.start)*1000/int64(s.rate)) - leadMS}
	s.n++
	s.start += cut
	keep := min(s.lead, cut)
	s.tail = append(s.tail[:0], s.buf[2*(cut-keep):2*cut]...)
	s.buf = s.buf[:copy(s.buf, s.buf[2*cut:])]
	s.done = last
	return ch, true, nil
}

// Place moves the segments the engine recognised in the chunk's file onto
// the whole file's timeline, dropping what it heard in the lead-in.
func (ch Chunk) Place(segs []Segment) []Segment {
	var out []Segment
	off := ch.OffsetMS
	for _, s := range segs {
		var ok bool
		if s, ok = dropLead(s, ch.LeadMS); !ok {
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
	return out
}

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
	f, err := os.CreateTemp(c.TempDir, fmt.Sprintf(chunkFilePattern, n))
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

// minCutPauseMS: when audio is cut only to use the cores (no more chunks
// than Concurrency, all decoded at once), a cut goes into the pause
// nearest its target among those at least minCutPauseMS and half as long
// as the window's longest pause, else into the window's quietest stretch.
// The step ends with the longest chunk, so a cut at the window's edge
// costs a fifth of a chunk's time: the 44 s bench video was cut 26.5 s
// + 17.9 s (2.8 and 1.7 CPU-s to decode) where 21 + 23 s decode in ~2.4
// each. More chunks than Concurrency are balanced by the queue and keep
// the quietest cut: pocketsphinx warm-started after a shorter pause, nearer
// the target, lost words (two_cities in 10 s chunks: 44 word errors
// against 40; TestChunkedPocketsphinxSkipsLeadIns).
const minCutPauseMS = 500

// quietest returns the sample index where buf is best cut in [lo, hi):
// with nearTarget, the middle of a long pause near the window's middle
// (minCutPauseMS); else, or with no such pause, of the stretch of
// quietest 20 ms frames (moving by half frames), so that a cut lands in
// the middle of a pause rather than at its edge. buf holds little-endian
// 16-bit samples; frame is 20 ms of them.
func quietest(buf []byte, lo, hi, frame int, nearTarget bool) int {
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
	// Frames of 20 ms every 10 ms: a run of k+1 quiet frames is a pause
	// of 10k+20 ms.
	if nearTarget {
		if i, ok := nearestPause(energy, (minCutPauseMS-20)/10, float64(frame)); ok {
			return lo + i*hop + frame/2
		}
	}
	first, last := quietRun(energy, float64(frame))
	return lo + (first+last)/2*hop + frame/2
}

// nearestPause returns the middle frame of a pause: a run of frames all
// quietBelow times quieter than the loudest tenth of energy (or below
// noise, about 1 LSB RMS a sample) at least minRun+1 frames and half the
// longest such run long, the one whose middle lies nearest the middle of
// energy.
func nearestPause(energy []float64, minRun int, noise float64) (int, bool) {
	loud := slices.Sorted(slices.Values(energy))[len(energy)*9/10]
	limit := max(loud/quietBelow, noise)
	var runs [][2]int
	longest := 0
	for i := 0; i < len(energy); i++ {
		if energy[i] > limit {
			continue
		}
		j := i
		for j+1 < len(energy) && energy[j+1] <= limit {
			j++
		}
		runs = append(runs, [2]int{i, j})
		longest = max(longest, j-i)
		i = j
	}
	mid, best, found := len(energy)/2, 0, false
	for _, r := range runs {
		c := (r[0] + r[1]) / 2
		if n := r[1] - r[0]; n >= minRun && 2*n >= longest && (!found || max(c-mid, mid-c) < max(best-mid, mid-best)) {
			best, found = c, true
		}
	}
	return best, found
}

// quietRun is the stretch of frames around the quietest one that are
// nearly as quiet (within 50%, or a noise floor of about 1 LSB RMS).
func quietRun(energy []float64, noise float64) (first, last int) {
	best := 0
	for i, e := range energy {
		if e < energy[best] {
			best = i
		}
	}
	limit := energy[best]*1.5 + noise
	first, last = best, best
	for first > 0 && energy[first-1] <= limit {
		first--
	}
	for last < len(energy)-1 && energy[last+1] <= limit {
		last++
	}
	return first, last
}

// TranscribeChunk transcribes one chunk that Split cut, wherever its file
// is now, with Engine alone (a chunk is never cut again) and places the
// segments on the whole file's timeline.
//
// A chunk whose cut lies in a pause (the audio pauseMS around it 20 dB
// quieter than the speech) goes to an Engine that can be warmed up
// without decoding (Pocketsphinx) with its lead-in skipped: the lead-in
// only sets where the engine's normalisation starts, and no audio is
// decoded twice. A chunk cut in speech has its lead-in decoded as before.
//
// With Nice set, a chunk at least half ChunkSeconds long (its own audio,
// without the lead-in) — a long recording's, cut at full chunks — is
// transcribed Yielding at Nice, so that short tasks, transcribed whole,
// and the other steps on the same cores go first, and the long one takes
// what they leave. Shorter chunks (audio cut only to use the cores, 44 s
// into two of 22 s) run at the worker's priority. Off by default: on a
// machine shared with other work the long recording yields to all of it
// (one run on this loaded machine, load 20–26: the 10-minute video took
// 1.35× the serial script and the clip beside it 1.84× its idle time).
func (c *Chunker) TranscribeChunk(ctx context.Context, ch Chunk, language string) ([]Segment, error) {
	if c.Nice > 0 && c.long(ch) {
		ctx = Yielding(ctx, c.Nice)
	}
	segs, err := c.transcribeChunk(ctx, ch, language)
	if err != nil {
		return nil, fmt.Errorf("transcribe chunk %d at %d ms: %w", ch.Index, ch.OffsetMS, err)
	}
	return ch.Place(segs), nil
}

// long reports whether ch's own audio lasts at least half ChunkSeconds.
func (c *Chunker) long(ch Chunk) bool {
	f, h, err := openMonoWAV(ch.Path)
	if err != nil {
		return false // transcribeChunk reports it
	}
	f.Close()
	if h.DataSize < 0 || h.SampleRate <= 0 {
		return false
	}
	ms := h.DataSize/2*1000/int64(h.SampleRate) - int64(ch.LeadMS)
	return ms*2 >= int64(c.seconds())*1000
}

// transcribeChunk transcribes a chunk's file, skipping its lead-in when
// the cut lies in a pause and Engine can be warmed up without it.
func (c *Chunker) transcribeChunk(ctx context.Context, ch Chunk, language string) ([]Segment, error) {
	w, ok := c.Engine.(warmStarter)
	if !ok || ch.LeadMS <= 0 {
		return c.Engine.Transcribe(ctx, ch.Path, language)
	}
	samples, rate, err := readSamples(ch.Path)
	if err != nil {
		return nil, err
	}
	if !inPause(samples, rate, int(int64(ch.LeadMS)*int64(rate)/1000)) {
		return c.Engine.Transcribe(ctx, ch.Path, language)
	}
	return w.TranscribeAfter(ctx, ch.Path, language, ch.LeadMS)
}
