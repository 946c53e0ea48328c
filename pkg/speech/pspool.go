package speech

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/cores"
)

// decoderPool keeps loaded pocketsphinx decoders of one configuration
// between files and tasks: at most size exist, each used by one file at a
// time, so a worker holds at most size models (about 100 MB each) and
// never loads one per file. A decoder is loaded when a file finds none
// idle, and freed once it has been idle for decoderIdle, so an idle
// worker holds none (as with a command per file). Which file decodes when
// is decodeSlots'.
type decoderPool struct {
	args    []string
	slots   decodeSlots
	idleFor time.Duration // decoderIdle when the pool was made
	mu      sync.Mutex
	idle    []idleDecoder // the most recently used last
	sweep   *time.Timer   // set while decoders are idle
}

// idleDecoder is a loaded decoder waiting for a file since at.
type idleDecoder struct {
	d  *psDecoder
	at time.Time
}

// decoderIdle is how long a loaded decoder is kept without a file (read
// under poolsMu when a pool is made).
var decoderIdle = time.Minute

var (
	poolsMu sync.Mutex
	pools   = map[string]*decoderPool{}
)

// sharedPool returns the process's pool for args, making it with size
// decoders at most the first time: when size ≤ 0, one more than the cores
// (cores.Usable), as asr has consumers, so that a short task's file does
// not wait for a decoder behind two long ones.
func sharedPool(args []string, size int) *decoderPool {
	key := strings.Join(args, "\x00")
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if p, ok := pools[key]; ok {
		return p
	}
	if size <= 0 {
		size = cores.Usable() + 1
	}
	p := &decoderPool{args: args, slots: newDecodeSlots(size, cores.Usable()), idleFor: decoderIdle}
	pools[key] = p
	return p
}

// transcribe decodes wavPath with a decoder of the pool and returns what
// pocketsphinx_continuous -time yes prints for it; with cmnMean, the
// cepstral mean normalisation starts there rather than at the model's.
// With nice > 0 (a Yielding decode) it decodes on an OS thread of its own
// nice steps nicer than the worker, as the command would run, and that
// thread ends with the decode: the model stays loaded either way.
//
// The decode runs on a goroutine of its own, watched: once stall passes
// without progress (newStallWatch) it is abandoned where it is, stuck in
// the C library or on input that never comes, and transcribe returns
// ErrStalled. An abandoned decode keeps its slots and its decoder until it
// ends, if ever; its decoder is then freed, never given back.
func (p *decoderPool) transcribe(ctx context.Context, wavPath string, cmnMean []float64, nice int, stall time.Duration) (string, error) {
	release, err := p.slots.acquire(ctx, nice > 0)
	if err != nil {
		return "", err
	}
	w := newStallWatch(stall)
	done := make(chan decoded, 1)
	go func() {
		defer release()
		var r decoded
		decode := func() { r.out, r.err = p.decodeFile(ctx, wavPath, cmnMean, w) }
		if nice > 0 {
			onNicedThread(nice, decode)
		} else {
			decode()
		}
		done <- r
	}()
	return w.wait(ctx, done, filepath.Base(wavPath))
}

// decodeSlots admits decodes to a pool of size decoders on a worker that
// sees cores cores: at most size at once; plain ones (a short task's file,
// at the worker's priority) at most cores of them, since three at once on
// two cores cost 10–15 % more CPU each (their models take turns in the
// caches) and finish no sooner; Yielding ones (a long recording's chunks,
// niced) at most cores and one fewer than size, so that a short task's
// file always finds a decoder free of them (asr has a consumer more than
// the cores for it).
type decodeSlots struct {
	all, plain, niced chan struct{}
}

// newDecodeSlots returns the slots of a pool of size decoders on cores cores.
func newDecodeSlots(size, cores int) decodeSlots {
	size, cores = max(size, 1), max(cores, 1)
	niced := min(size, cores)
	if size > 1 {
		niced = min(niced, size-1)
	}
	return decodeSlots{all: make(chan struct{}, size), plain: make(chan struct{}, min(size, cores)),
		niced: make(chan struct{}, niced)}
}

// acquire waits until a decode of its kind may start (niced: a Yielding
// one) or ctx ends, and returns what gives its slots back.
func (s decodeSlots) acquire(ctx context.Context, niced bool) (func(), error) {
	own := s.plain
	if niced {
		own = s.niced
	}
	select {
	case own <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case s.all <- struct{}{}:
	case <-ctx.Done():
		<-own
		return nil, ctx.Err()
	}
	return func() { <-s.all; <-own }, nil
}

// decodeFile decodes wavPath with an idle or newly loaded decoder and
// gives it back, telling w how it progresses.
func (p *decoderPool) decodeFile(ctx context.Context, wavPath string, cmnMean []float64, w *stallWatch) (string, error) {
	d, err := p.take()
	if err != nil {
		return "", err
	}
	w.progress(0)
	defer p.putBack(d, w)
	f, err := os.Open(wavPath)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", wavPath, err)
	}
	defer f.Close()
	r := io.Reader(bufio.NewReaderSize(f, 64<<10))
	if strings.HasSuffix(wavPath, ".wav") {
		// pocketsphinx_continuous skips 44 bytes of a .wav file's header and
		// decodes everything after it; so does the loaded decoder.
		if _, err := io.CopyN(io.Discard, r, 44); err != nil {
			return "", fmt.Errorf("read %s: %w", wavPath, err)
		}
	}
	return d.decode(ctxReader{ctx, r}, cmnMean, w.progress)
}

// take returns the most recently used idle decoder or loads a new one.
func (p *decoderPool) take() (*psDecoder, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		d := p.idle[n-1].d
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return d, nil
	}
	p.mu.Unlock()
	return newPSDecoder(p.args)
}

// putBack gives d back for the next file, or frees it when its decode was
// abandoned (w): whatever held it up, it is not trusted again.
func (p *decoderPool) putBack(d *psDecoder, w *stallWatch) {
	if w.abandoned() {
		d.free()
		return
	}
	p.give(d)
}

// give puts a decoder back for the next file.
func (p *decoderPool) give(d *psDecoder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, idleDecoder{d, time.Now()})
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleFor, p.freeIdle)
	}
}

// freeIdle frees the decoders idle for idleFor and looks again when
// the next of the others would be. It frees them after letting go of the
// pool, so that a free waiting for libMu (behind another pool's load)
// holds up no file's take or give.
func (p *decoderPool) freeIdle() {
	p.mu.Lock()
	now := time.Now()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].at) >= p.idleFor {
		n++
	}
	stale := make([]idleDecoder, n)
	copy(stale, p.idle)
	p.idle = append(p.idle[:0], p.idle[n:]...)
	if len(p.idle) == 0 {
		p.sweep = nil
	} else {
		p.sweep = time.AfterFunc(p.idleFor-now.Sub(p.idle[0].at), p.freeIdle)
	}
	p.mu.Unlock()
	for _, d := range stale {
		d.d.free()
	}
}

// ctxReader stops a decode when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
