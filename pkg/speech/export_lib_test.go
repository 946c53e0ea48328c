//go:build cgo && pocketsphinx_lib

package speech

import (
	"bytes"
	"os"
	"time"
)

// SetDecoderIdle sets how long the decoders of pools made from now on are
// kept idle, for a test; the returned func restores it.
func SetDecoderIdle(d time.Duration) (restore func()) {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	old := decoderIdle
	decoderIdle = d
	return func() {
		poolsMu.Lock()
		defer poolsMu.Unlock()
		decoderIdle = old
	}
}

// LoadedDecoders is how many decoders of p's configuration are loaded and
// idle in this process.
func LoadedDecoders(p *Pocketsphinx) int {
	pool := sharedPool(p.modelArgs(), p.Decoders)
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return len(pool.idle)
}

// BusyDecodes is how many decodes of p's configuration hold a decoder's
// slot in this process (an abandoned one until it really ends).
func BusyDecodes(p *Pocketsphinx) int {
	return len(sharedPool(p.modelArgs(), p.Decoders).slots.all)
}

// LoadedDecoder is a decoder loaded in process outside any pool, for a
// test that loads, uses and frees decoders itself.
type LoadedDecoder struct{ d *psDecoder }

// LoadDecoder loads a decoder with p's arguments, as its pool would.
func LoadDecoder(p *Pocketsphinx) (*LoadedDecoder, error) {
	d, err := newPSDecoder(p.modelArgs())
	if err != nil {
		return nil, err
	}
	return &LoadedDecoder{d}, nil
}

// Decode decodes a WAV file as a pool's decoder does (its first 44 bytes
// skipped) and returns what pocketsphinx_continuous -time yes prints.
func (l *LoadedDecoder) Decode(wavPath string) (string, error) {
	b, err := os.ReadFile(wavPath)
	if err != nil {
		return "", err
	}
	return l.d.decode(bytes.NewReader(b[min(44, len(b)):]), nil, func(int) {})
}

// Free frees the decoder.
func (l *LoadedDecoder) Free() { l.d.free() }
