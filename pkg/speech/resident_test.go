//go:build cgo && pocketsphinx_lib

package speech_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
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
	resident := &speech.Pocketsphinx{Decoders: 2}
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
	resident := &speech.Pocketsphinx{Decoders: 2}
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

// TestYieldingDecodesOnANicedThread: a long recording's chunk (a Yielding
// context) is decoded by a loaded decoder on a thread of its own, five
// steps nicer than the worker while it decodes, and that thread is gone
// afterwards (no goroutine runs on at the lower priority); the decoder
// stays loaded for the next file, whichever way it comes, and is freed
// once it has been idle for a while. Both ways give the same transcript.
func TestYieldingDecodesOnANicedThread(t *testing.T) {
	restore := speech.SetDecoderIdle(300 * time.Millisecond)
	t.Cleanup(restore)
	// -maxhmmpf 5999: a configuration, so a pool, of this test's own.
	p := &speech.Pocketsphinx{Search: "-fwdflat no -maxhmmpf 5999", Decoders: 1}
	wav := speechtest.Fixture(t, "jfk.wav")
	ctx := context.Background()
	own, ok := threadNices()[os.Getpid()]
	if !ok {
		t.Fatal("cannot read this process's threads' niceness from /proc/self/task")
	}
	want := min(own+5, 19)
	if want == own {
		t.Logf("the test runs at niceness %d: a Yielding thread cannot be told from the others", own)
	}

	// Watch this process's threads while the Yielding decode runs.
	seen := make(chan bool, 1)
	stop := make(chan struct{})
	go func() {
		found := false
		for !found {
			select {
			case <-stop:
				seen <- false
				return
			case <-time.After(2 * time.Millisecond):
			}
			for tid, n := range threadNices() {
				found = found || (n == want && tid != os.Getpid())
			}
		}
		seen <- true
	}()
	niced, err := p.Transcribe(speech.Yielding(ctx, 5), wav, "en")
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if want != own && !<-seen {
		t.Fatalf("no thread of this process ran at niceness %d during the Yielding decode", want)
	}
	if want != own {
		testenv.EventuallyWithin(t, 5*time.Second, "the niced thread to end", func() bool {
			for _, n := range threadNices() {
				if n == want {
					return false
				}
			}
			return true
		})
	}
	if n := speech.LoadedDecoders(p); n != 1 {
		t.Fatalf("after a Yielding decode %d decoders are loaded, want 1", n)
	}
	loaded, err := p.Transcribe(ctx, wav, "en")
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) == 0 || !slices.EqualFunc(niced, loaded, func(a, b speech.Segment) bool { return a.Text == b.Text }) {
		t.Fatalf("the Yielding and the plain decode disagree:\n%v\n%v", niced, loaded)
	}
	if n := speech.LoadedDecoders(p); n != 1 {
		t.Fatalf("after two decodes %d decoders are loaded, want 1 (the same one again)", n)
	}
	testenv.EventuallyWithin(t, 5*time.Second, "the idle decoder freed", func() bool { return speech.LoadedDecoders(p) == 0 })
	if _, err := p.Transcribe(speech.Yielding(ctx, 5), wav, "en"); err != nil {
		t.Fatalf("decode after the idle decoder was freed: %v", err)
	}
	if n := speech.LoadedDecoders(p); n != 1 {
		t.Fatalf("after a decode %d decoders are loaded, want 1", n)
	}
}

// threadNices is the niceness of each thread of this process, by id
// (none without /proc).
func threadNices() map[int]int {
	dirs, _ := os.ReadDir("/proc/self/task")
	nices := map[int]int{}
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/self/task/" + d.Name() + "/stat")
		if err != nil {
			continue // the thread ended meanwhile
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "tid (comm) "
		tid, err1 := strconv.Atoi(d.Name())
		nice, err2 := strconv.Atoi(fields[16]) // field 19 of stat, the niceness
		if err1 == nil && err2 == nil {
			nices[tid] = nice
		}
	}
	return nices
}
