//go:build cgo && pocketsphinx_lib

package speech_test

import (
	"context"
	"os"
	"testing"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
	"golang.org/x/sync/errgroup"
)

// TestResidentMatchesCommand decodes the fixtures, whole and in the chunks
// the asr step cuts, with pocketsphinx_continuous (a process per file) and
// with decoders kept loaded (a pool of two decoding two files at once, so
// each decoder decodes several files after each other and two decode side
// by side): the segments must be the same, with word times within 20 ms.
func TestResidentMatchesCommand(t *testing.T) {
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
