package speech

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/dubflow/dubflow/pkg/cores"
)

// decoderPool keeps loaded pocketsphinx decoders of one configuration
// between files and tasks: at most size exist, each used by one file at a
// time, so a worker holds at most size models (about 100 MB each) and
// never loads one per chunk.
type decoderPool struct {
	args []string
	sem  chan struct{} // a token per decoder in use or being loaded
	mu   sync.Mutex
	idle []*psDecoder
}

var (
	poolsMu sync.Mutex
	pools   = map[string]*decoderPool{}
)

// sharedPool returns the process's pool for args, making it with size
// decoders at most (cores.Usable when size ≤ 0) the first time.
func sharedPool(args []string, size int) *decoderPool {
	key := strings.Join(args, "\x00")
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if p, ok := pools[key]; ok {
		return p
	}
	if size <= 0 {
		size = cores.Usable()
	}
	p := &decoderPool{args: args, sem: make(chan struct{}, size)}
	pools[key] = p
	return p
}

// transcribe decodes wavPath with a decoder of the pool and returns what
// pocketsphinx_continuous -time yes prints for it; with cmnMean, the
// cepstral mean normalisation starts there rather than at the model's.
func (p *decoderPool) transcribe(ctx context.Context, wavPath string, cmnMean []float64) (string, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-p.sem }()
	d, err := p.take()
	if err != nil {
		return "", err
	}
	f, err := os.Open(wavPath)
	if err != nil {
		p.give(d)
		return "", fmt.Errorf("open %s: %w", wavPath, err)
	}
	defer f.Close()
	r := io.Reader(bufio.NewReaderSize(f, 64<<10))
	if strings.HasSuffix(wavPath, ".wav") {
		// pocketsphinx_continuous skips 44 bytes of a .wav file's header and
		// decodes everything after it; so does the loaded decoder.
		if _, err := io.CopyN(io.Discard, r, 44); err != nil {
			p.give(d)
			return "", fmt.Errorf("read %s: %w", wavPath, err)
		}
	}
	out, err := d.decode(ctxReader{ctx, r}, cmnMean)
	p.give(d)
	return out, err
}

// take returns an idle decoder or loads a new one.
func (p *decoderPool) take() (*psDecoder, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		d := p.idle[n-1]
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
	p.idle = append(p.idle, d)
	p.mu.Unlock()
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
