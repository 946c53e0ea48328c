//go:build cgo && pocketsphinx_lib

package speech

import "time"

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
