//go:build cgo && pocketsphinx_lib

package speech_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"golang.org/x/sync/errgroup"
)

// TestResidentMatchesCommand decodes the fixtures, whole and in the chunks
// the asr step cuts, with pocketsphinx_continuous (a process per file) and
// with decoders kept loaded (a pool of two decoding two files at once, so
// each decoder decodes several files after each other and two decode side
// by side): the segments must be the same, with word times within 20 ms.
func TestResidentMatchesCommand(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/pocketsphinx_continuous"); err != nil {
		t.Fatalf("pocketsphinx_continuous not installed: %v", err)
	}
	ctx := context.Background()
	cli := &speech.Pocketsphinx{Command: "pocketsphinx_continuous"}
	resident := &speech.Pocketsphinx{ExtraArgs: []string{"-logfn", os.DevNull}, Decoders: 2}
	if !resident.Resident() || cli.Resident() {
		t.Fatal("Resident: want the loaded decoder without Command, the command with it")
	}
	files := []string{speechtest.Fixture(t, "jfk.wav"), speechtest.Fixture(t, "two_cities.wav")}
	ch := &speech.Chunker{ChunkSeconds: 10, TempDir: t.TempDir()}
	if err := ch.Split(ctx, files[1], func(c speech.Chunk) error { files = append(files, c.Path); return nil }); err != nil {
		t.Fatal(err)
	}
	files = append(files, files[0]) // the first file again, after the others
	got := make([][]speech.Segment, len(files))
	var g errgroup.Group
	g.SetLimit(2)
	for i, f := range files {
		g.Go(func() (err error) {
			got[i], err = resident.Transcribe(ctx, f, "en")
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	words := 0
	for i, f := range files {
		want, err := cli.Transcribe(ctx, f, "en")
		if err != nil {
			t.Fatal(err)
		}
		words += sameSegments(t, f, got[i], want)
	}
	if words < 100 {
		t.Fatalf("only %d words compared: the fixtures were not decoded", words)
	}
}

// sameSegments fails unless got and want hold the same words with times
// within 20 ms; it returns how many words it compared.
func sameSegments(t *testing.T, file string, got, want []speech.Segment) int {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d segments, want %d:\n got %+v\nwant %+v", file, len(got), len(want), got, want)
	}
	n := 0
	for i := range want {
		g, w := got[i], want[i]
		if g.Text != w.Text || len(g.Words) != len(w.Words) || absMS(g.StartMS-w.StartMS) > 20 || absMS(g.EndMS-w.EndMS) > 20 {
			t.Fatalf("%s segment %d: %+v, want %+v", file, i, g, w)
		}
		for j := range w.Words {
			if g.Words[j].Text != w.Words[j].Text || absMS(g.Words[j].StartMS-w.Words[j].StartMS) > 20 || absMS(g.Words[j].EndMS-w.Words[j].EndMS) > 20 {
				t.Fatalf("%s segment %d word %d: %+v, want %+v", file, i, j, g.Words[j], w.Words[j])
			}
			n++
		}
	}
	return n
}

// TestResidentWarmStartMatchesCommand: a chunk decoded without its
// lead-in (TranscribeAfter) gives the same segments from the loaded
// decoder, its cepstral mean set in place, as from the command, given it
// in a copy of the model's feat.params.
func TestResidentWarmStartMatchesCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cli := &speech.Pocketsphinx{Command: "pocketsphinx_continuous"}
	resident := &speech.Pocketsphinx{ExtraArgs: []string{"-logfn", os.DevNull}, Decoders: 2}
	ch := &speech.Chunker{ChunkSeconds: 10, TempDir: t.TempDir()}
	var chunks []speech.Chunk
	err := ch.Split(ctx, speechtest.Fixture(t, "two_cities.wav"), func(c speech.Chunk) error { chunks = append(chunks, c); return nil })
	if err != nil {
		t.Fatal(err)
	}
	words := 0
	for _, c := range chunks[1:] {
		got, err := resident.TranscribeAfter(ctx, c.Path, "en", c.LeadMS)
		if err != nil {
			t.Fatal(err)
		}
		want, err := cli.TranscribeAfter(ctx, c.Path, "en", c.LeadMS)
		if err != nil {
			t.Fatal(err)
		}
		words += sameSegments(t, c.Path, got, want)
	}
	if words < 50 {
		t.Fatalf("only %d words compared: the chunks were not decoded", words)
	}
}

// TestYieldingDecodesWithTheCommand: a long recording's chunk (a Yielding
// context) is decoded by the command, at the lower priority it asks for,
// not by a loaded decoder at the worker's own; anything else loads a
// decoder, which is freed once it has been idle for a while, or as soon
// as a Yielding decode starts the command. Both ways give the same
// transcript.
func TestYieldingDecodesWithTheCommand(t *testing.T) {
	if _, err := os.Stat("/usr/bin/pocketsphinx_continuous"); err != nil {
		t.Fatalf("pocketsphinx_continuous not installed: %v", err)
	}
	restore := speech.SetDecoderIdle(300 * time.Millisecond)
	t.Cleanup(restore)
	// -maxhmmpf 5999: a configuration, so a pool, of this test's own.
	p := &speech.Pocketsphinx{Search: "-fwdflat no -maxhmmpf 5999", Decoders: 1}
	wav := speechtest.Fixture(t, "jfk.wav")
	ctx := context.Background()

	niced, err := p.Transcribe(speech.Yielding(ctx, 5), wav, "en")
	if err != nil {
		t.Fatal(err)
	}
	if n := speech.LoadedDecoders(p); n != 0 {
		t.Fatalf("after a Yielding decode %d decoders are loaded, want 0 (the command decodes it)", n)
	}
	loaded, err := p.Transcribe(ctx, wav, "en")
	if err != nil {
		t.Fatal(err)
	}
	if n := speech.LoadedDecoders(p); n != 1 {
		t.Fatalf("after a decode %d decoders are loaded, want 1", n)
	}
	if len(loaded) == 0 || !slices.EqualFunc(niced, loaded, func(a, b speech.Segment) bool { return a.Text == b.Text }) {
		t.Fatalf("the command and the loaded decoder disagree:\n%v\n%v", niced, loaded)
	}
	testenv.EventuallyWithin(t, 5*time.Second, "the idle decoder freed", func() bool { return speech.LoadedDecoders(p) == 0 })
	if _, err := p.Transcribe(ctx, wav, "en"); err != nil {
		t.Fatalf("decode after the idle decoder was freed: %v", err)
	}
	if n := speech.LoadedDecoders(p); n != 1 {
		t.Fatalf("after a decode %d decoders are loaded, want 1", n)
	}

	// A Yielding decode frees the idle decoders before it runs the command,
	// so the worker does not hold both models at once: a pool of its own
	// (-maxhmmpf 5998) with the minute's idle time, which this decode is
	// far from reaching.
	restore()
	q := &speech.Pocketsphinx{Search: "-fwdflat no -maxhmmpf 5998", Decoders: 1}
	if _, err := q.Transcribe(ctx, wav, "en"); err != nil {
		t.Fatal(err)
	}
	if n := speech.LoadedDecoders(q); n != 1 {
		t.Fatalf("after a decode %d decoders are loaded, want 1", n)
	}
	if _, err := q.Transcribe(speech.Yielding(ctx, 5), wav, "en"); err != nil {
		t.Fatal(err)
	}
	if n := speech.LoadedDecoders(q); n != 0 {
		t.Fatalf("after a Yielding decode %d idle decoders are still loaded, want 0", n)
	}
}
