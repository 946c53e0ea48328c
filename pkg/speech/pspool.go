package speech

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
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
// worker holds none (as with a command per file).
type decoderPool struct {
	args    []string
	sem     chan struct{} // a token per decoder in use or being loaded
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
	p := &decoderPool{args: args, sem: make(chan struct{}, size), idleFor: decoderIdle}
	pools[key] = p
	return p
}

// transcribe decodes wavPath with a decoder of the pool and returns what
// pocketsphinx_continuous -time yes prints for it; with cmnMean, the
// cepstral mean normalisation starts there rather than at the model's.
// With nice > 0 (a Yielding decode) it decodes on an OS thread of its own
// nice steps nicer than the worker, as the command would run, and that
// thread ends with the decode: the model stays loaded either way.
func (p *decoderPool) transcribe(ctx context.Context, wavPath string, cmnMean []float64, nice int) (string, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-p.sem }()
	if nice <= 0 {
		return p.decodeFile(ctx, wavPath, cmnMean)
	}
	var out string
	var err error
	onNicedThread(nice, func() { out, err = p.decodeFile(ctx, wavPath, cmnMean) })
	return out, err
}

// decodeFile decodes wavPath with an idle or newly loaded decoder and
// gives it back.
func (p *decoderPool) decodeFile(ctx context.Context, wavPath string, cmnMean []float64) (string, error) {
	d, err := p.take()
	if err != nil {
		return "", err
	}
	defer p.give(d)
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
	return d.decode(ctxReader{ctx, r}, cmnMean)
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
// the next of the others would be.
func (p *decoderPool) freeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].at) >= p.idleFor {
		p.idle[n].d.free()
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	if len(p.idle) == 0 {
		p.sweep = nil
		return
	}
	p.sweep = time.AfterFunc(p.idleFor-now.Sub(p.idle[0].at), p.freeIdle)
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
