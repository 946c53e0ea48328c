//go:build cgo && pocketsphinx_lib

package speech_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// stallingDecoder returns the arguments that make a loaded decoder stop
// inside the C library at its utterance n (from 0), and what lets it go on:
// pocketsphinx writes each utterance's audio to -rawlogdir/NNNNNNNNN.raw,
// made here a FIFO that nobody reads, so the decoder's fopen waits there
// for a reader (no progress, no way to interrupt it). resume opens the FIFO,
// removes it (a decoder loaded later writes a plain file there) and reads
// it until the decoder closes it.
func stallingDecoder(t *testing.T, n int) (args []string, resume func()) {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, fmt.Sprintf("%09d.raw", n))
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"-rawlogdir", dir}, func() {
		f, err := os.Open(fifo)
		if err != nil {
			t.Error(err)
			return
		}
		_ = os.Remove(fifo)
		go func() {
			_, _ = io.Copy(io.Discard, f)
			f.Close()
		}()
	}
}

// TestStalledDecodeIsGivenUp: a decode whose decoder stops in the C
// library after its first utterance (stallingDecoder) is given up once
// Stall passes without progress: Transcribe returns ErrStalled, marked
// Unavailable (the runtime hands the message back without spending a
// retry), counting the samples consumed before; OnStall is told. The
// decoder is abandoned where it is: it keeps its slot until it really
// ends, and is then freed, never given back; the pool then decodes again.
func TestStalledDecodeIsGivenUp(t *testing.T) {
	t.Parallel()
	stallArgs, resume := stallingDecoder(t, 1)
	stalls := make(chan error, 4)
	grammar := []string{"-dict", filepath.Join("testdata", "stress", "jfk.dict"), "-jsgf", filepath.Join("testdata", "stress", "jfk.jsgf")}
	// -maxhmmpf 5996: a configuration, so a pool, of this test's own.
	p := &speech.Pocketsphinx{Search: "-maxhmmpf 5996", ExtraArgs: append(grammar, stallArgs...), Decoders: 1,
		Stall: 3 * time.Second, OnStall: func(err error) { stalls <- err }}
	wav := speechtest.Fixture(t, "jfk.wav")
	ctx := context.Background()

	start := time.Now()
	_, err := p.Transcribe(ctx, wav, "en")
	took := time.Since(start)
	if !errors.Is(err, speech.ErrStalled) || !fault.IsUnavailable(err) {
		t.Fatalf("Transcribe of a decoder stuck in C: %v, want ErrStalled marked Unavailable", err)
	}
	if took < p.Stall {
		t.Fatalf("given up after %s, before its Stall of %s", took, p.Stall)
	}
	if !regexp.MustCompile(`after [1-9][0-9]* samples`).MatchString(err.Error()) {
		t.Fatalf("%v: want the samples consumed before the stall (its first utterance)", err)
	}
	select {
	case got := <-stalls:
		if got.Error() != err.Error() {
			t.Fatalf("OnStall told %v, Transcribe returned %v", got, err)
		}
	default:
		t.Fatal("OnStall was not called")
	}
	if busy, idle := speech.BusyDecodes(p), speech.LoadedDecoders(p); busy != 1 || idle != 0 {
		t.Fatalf("after the stall %d decodes hold a slot and %d decoders are idle, want the abandoned one holding its slot, none idle", busy, idle)
	}

	resume()
	testenv.EventuallyWithin(t, 30*time.Second, "the abandoned decode to end", func() bool { return speech.BusyDecodes(p) == 0 })
	if n := speech.LoadedDecoders(p); n != 0 {
		t.Fatalf("the abandoned decoder was given back to the pool (%d idle), want it freed", n)
	}
	segs, err := p.Transcribe(ctx, wav, "en")
	if err != nil || len(segs) == 0 {
		t.Fatalf("decode after the stall: %v, %v", segs, err)
	}
	if len(stalls) != 0 {
		t.Fatalf("OnStall called again: %v", <-stalls)
	}
}
