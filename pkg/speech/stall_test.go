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

// TestStoppedDecodeReturnsAtOnce: when the step's context ends (its task
// cancelled) Transcribe returns its error at once, even while the decoder
// cannot get to its next block of samples (stuck here in the C library; on
// a busy machine, a niced thread waiting for the CPU): its first
// utterance's start (stallingDecoder 0) waits for a reader the test opens
// only after Transcribe returned. The decode ends by itself once it can,
// and its decoder, not stalled, goes back to the pool.
func TestStoppedDecodeReturnsAtOnce(t *testing.T) {
	t.Parallel()
	stallArgs, resume := stallingDecoder(t, 0)
	grammar := []string{"-dict", filepath.Join("testdata", "stress", "jfk.dict"), "-jsgf", filepath.Join("testdata", "stress", "jfk.jsgf")}
	// -maxhmmpf 5997: a configuration, so a pool, of this test's own.
	p := &speech.Pocketsphinx{Search: "-maxhmmpf 5997", ExtraArgs: append(grammar, stallArgs...), Decoders: 1,
		Stall: time.Hour, OnStall: func(err error) { t.Errorf("OnStall: %v", err) }}
	wav := speechtest.Fixture(t, "jfk.wav")
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := p.Transcribe(ctx, wav, "en")
		got <- err
	}()
	testenv.EventuallyWithin(t, time.Minute, "the decode to hold its decoder", func() bool { return speech.BusyDecodes(p) == 1 })
	cancel()
	var err error
	testenv.EventuallyWithin(t, 30*time.Second, "Transcribe to return after the cancel", func() bool {
		select {
		case err = <-got:
			return true
		default:
			return false
		}
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, speech.ErrStalled) {
		t.Fatalf("Transcribe after the cancel: %v, want context.Canceled (not a stall)", err)
	}
	if busy := speech.BusyDecodes(p); busy != 1 {
		t.Fatalf("%d decodes hold a slot while the decoder is stuck, want 1", busy)
	}
	resume()
	testenv.EventuallyWithin(t, 30*time.Second, "the stopped decode to end", func() bool { return speech.BusyDecodes(p) == 0 })
	if n := speech.LoadedDecoders(p); n != 1 {
		t.Fatalf("%d decoders idle after the stopped decode ended, want its decoder given back", n)
	}
}
