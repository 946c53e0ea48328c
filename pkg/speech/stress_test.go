//go:build cgo && pocketsphinx_lib

package speech_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"golang.org/x/sync/errgroup"
)

// The storm of TestDecodersConcurrently: how many goroutines do what, how
// often. A decoder of the small grammar loads in about 50 ms of CPU, the
// worker's own model in about 300 ms (and decodes slower): 8×20 + 8×6 +
// 2×1 = 210 decoders loaded or used by 18 goroutines at once.
const (
	stormLoaders, stormLoads         = 8, 20 // load, decode, free: the small grammar
	stormPoolUsers, stormPoolUses    = 8, 6  // Transcribe through two pools that free each decoder at once
	stormModelLoaders, stormModelUse = 2, 1  // load, decode, free: the worker's own model
)

// TestDecodersConcurrently loads, uses and frees decoders from many
// goroutines at once (issue 47: two loads at once hung the test binary in
// the C library):
//
//   - stormLoaders goroutines each load a decoder of a small grammar (the
//     fixture's words: the acoustic model's load without the language
//     model's), decode a clip with it and free it, stormLoads times;
//   - stormPoolUsers goroutines call Transcribe through two pools of three
//     decoders whose idle sweeper frees each decoder a millisecond after
//     its file, so that the sweeper's frees run beside the loads of the
//     files that find none idle; every other call is Yielding (decoded on
//     a niced thread of its own);
//   - stormModelLoaders goroutines load the worker's own model (the
//     language model and the trimmed lexicon), decode and free it beside
//     them.
//
// Every decode of a fresh decoder must print what a fresh decoder of the
// same configuration printed for the same clip alone, before the storm (a
// load that read a corrupted beam decodes differently); the pools' must
// succeed with the grammar's words (onlyWords). The storm must end within
// a bound: a hang fails with every goroutine's stack rather than waiting
// for the test binary's timeout. CI runs it under the race detector.
func TestDecodersConcurrently(t *testing.T) {
	restore := speech.SetDecoderIdle(time.Millisecond)
	t.Cleanup(restore)
	ctx := context.Background()
	clips := stormClips(t)
	grammar := []string{"-dict", filepath.Join("testdata", "stress", "jfk.dict"), "-jsgf", filepath.Join("testdata", "stress", "jfk.jsgf")}
	small := &speech.Pocketsphinx{ExtraArgs: grammar}
	model := &speech.Pocketsphinx{}
	// -maxhmmpf 5997 and 5998: two configurations, so two pools, of this
	// test's own.
	pools := []*speech.Pocketsphinx{
		{Search: "-maxhmmpf 5997", ExtraArgs: grammar, Decoders: 3},
		{Search: "-maxhmmpf 5998", ExtraArgs: grammar, Decoders: 3},
	}
	wantSmall, wantModel := loadedReference(t, small, clips), loadedReference(t, model, clips)
	words := grammarWords(t)

	start := time.Now()
	var g errgroup.Group
	var done atomic.Int64
	for i := range stormLoaders {
		g.Go(func() error { return loadDecodeFree(small, clips, wantSmall, i, stormLoads, &done) })
	}
	for i := range stormModelLoaders {
		g.Go(func() error { return loadDecodeFree(model, clips, wantModel, i, stormModelUse, &done) })
	}
	for i := range stormPoolUsers {
		g.Go(func() error {
			p := pools[i%len(pools)]
			for n := range stormPoolUses {
				c := (i + n) % len(clips)
				cctx := ctx
				if n%2 == 1 {
					cctx = speech.Yielding(ctx, 5)
				}
				segs, err := p.Transcribe(cctx, clips[c], "en")
				if err != nil {
					return fmt.Errorf("pool user %d, use %d: %w", i, n, err)
				}
				if err := onlyWords(segs, words); err != nil {
					return fmt.Errorf("pool user %d, use %d, clip %d: %w", i, n, c, err)
				}
				done.Add(1)
			}
			return nil
		})
	}
	stormWait(t, &g)
	total := stormLoaders*stormLoads + stormModelLoaders*stormModelUse + stormPoolUsers*stormPoolUses
	if n := done.Load(); n != int64(total) {
		t.Fatalf("%d decodes, want %d", n, total)
	}
	t.Logf("%d decoders loaded or used by %d goroutines at once in %s", total,
		stormLoaders+stormModelLoaders+stormPoolUsers, time.Since(start).Round(time.Millisecond))
	for _, p := range pools {
		testenv.EventuallyWithin(t, 10*time.Second, "the pools' idle decoders freed", func() bool { return speech.LoadedDecoders(p) == 0 })
	}
}

// loadDecodeFree loads a decoder of p, decodes a clip with it and frees it,
// n times, each decode checked against want (by clip) and counted in done.
func loadDecodeFree(p *speech.Pocketsphinx, clips, want []string, who, n int, done *atomic.Int64) error {
	for k := range n {
		c := (who + k) % len(clips)
		d, err := speech.LoadDecoder(p)
		if err != nil {
			return fmt.Errorf("goroutine %d, load %d: %w", who, k, err)
		}
		got, err := d.Decode(clips[c])
		d.Free()
		if err != nil {
			return fmt.Errorf("goroutine %d, load %d: %w", who, k, err)
		}
		if got != want[c] {
			return fmt.Errorf("goroutine %d, load %d, clip %d decoded differently beside the others:\n%s\nalone:\n%s", who, k, c, got, want[c])
		}
		done.Add(1)
	}
	return nil
}

// stormWait waits for g, failing with every goroutine's stack when it has
// not ended within a bound far above what the storm takes.
func stormWait(t *testing.T, g *errgroup.Group) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- g.Wait() }()
	bound := testenv.Within(t, 5*time.Minute)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bound):
		buf := make([]byte, 1<<20)
		t.Fatalf("decoders still busy after %s: hung?\n%s", bound, buf[:runtime.Stack(buf, true)])
	}
}

// stormClips cuts the jfk fixture into clips of a few seconds.
func stormClips(t *testing.T) []string {
	t.Helper()
	ch := &speech.Chunker{ChunkSeconds: 3, TempDir: t.TempDir()}
	var clips []string
	err := ch.Split(context.Background(), speechtest.Fixture(t, "jfk.wav"), func(c speech.Chunk) error {
		clips = append(clips, c.Path)
		return nil
	})
	if err != nil || len(clips) < 2 {
		t.Fatalf("split jfk.wav: %d clips, %v", len(clips), err)
	}
	return clips
}

// loadedReference is what a decoder of p, loaded alone, prints for each
// clip: a fresh decoder for each, as the storm's (a decoder that decoded
// other files before gives <s> a slightly different confidence).
func loadedReference(t *testing.T, p *speech.Pocketsphinx, clips []string) []string {
	t.Helper()
	out := make([]string, len(clips))
	for i, c := range clips {
		d, err := speech.LoadDecoder(p)
		if err != nil {
			t.Fatal(err)
		}
		out[i], err = d.Decode(c)
		d.Free()
		if err != nil || !strings.Contains(out[i], " ") {
			t.Fatalf("decode %s alone: %q, %v", c, out[i], err)
		}
	}
	return out
}

// grammarWords are the words of the small grammar's dictionary.
func grammarWords(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "stress", "jfk.dict"))
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		w, _, _ := strings.Cut(strings.Fields(line)[0], "(")
		words[w] = true
	}
	return words
}

// onlyWords checks that segs hold speech, and only words of the small
// grammar. (A decoder a pool kept gives the same clip slightly different
// words than a fresh one, depending on what it decoded before, so the
// pools' decodes are not compared word for word; the loaders' fresh ones
// are.)
func onlyWords(segs []speech.Segment, words map[string]bool) error {
	n := 0
	for _, s := range segs {
		for _, w := range s.Words {
			// (NULL) is a grammar's empty transition, which pocketsphinx
			// prints as a word.
			if !words[w.Text] && w.Text != "(NULL)" {
				return fmt.Errorf("word %q is not the grammar's: %+v", w.Text, segs)
			}
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("no words: %+v", segs)
	}
	return nil
}
