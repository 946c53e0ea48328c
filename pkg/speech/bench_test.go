package speech_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// BenchmarkApertiumBatching compares one apertium call per batch of 20
// lines with one call per line (BatchSize 1), in lines per second:
//
//	go test -run '^$' -bench ApertiumBatching -benchtime 3x ./speech/
func BenchmarkApertiumBatching(b *testing.B) {
	lines := make([]string, 20)
	for i := range lines {
		lines[i] = fmt.Sprintf("The meeting number %d starts at noon and the house is big.", i)
	}
	for _, size := range []int{20, 1} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			bt := &speech.Batcher{Engine: speech.NewApertium(), BatchSize: size}
			for b.Loop() {
				if _, err := bt.Translate(context.Background(), lines, "en", "es"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(lines))/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// BenchmarkApertiumPerChunk measures what one translate part costs the
// embedded engine: a chunk of 12 segments in one call, with the pipelines
// kept running between calls and with `apertium` started for each call,
// in ms per chunk:
//
//	go test -run '^$' -bench ApertiumPerChunk -benchtime 10x ./speech/
func BenchmarkApertiumPerChunk(b *testing.B) {
	chunk := make([]string, 12)
	for i := range chunk {
		chunk[i] = fmt.Sprintf("Segment %d: the meeting starts at noon, and the house near the river is big.", i)
	}
	for _, c := range []struct {
		name      string
		pipelines int
	}{{"per-call", -1}, {"pipeline", 1}} {
		b.Run(c.name, func(b *testing.B) {
			a := &speech.Apertium{Pipelines: c.pipelines}
			defer a.Close()
			// The first call starts the pipeline: a worker pays it once.
			if _, err := a.Translate(context.Background(), chunk, "en", "es"); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := a.Translate(context.Background(), chunk, "en", "es"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/chunk")
		})
	}
}

// BenchmarkPocketsphinxSearch decodes each fixture with the default
// search (DefaultPocketsphinxSearch) and with the package's own
// ("default"), alternating, reporting CPU seconds (the decoder's, from
// its rusage) and the word error rate:
//
//	go test -run '^$' -bench PocketsphinxSearch -benchtime 2x ./speech/
func BenchmarkPocketsphinxSearch(b *testing.B) {
	for _, name := range []string{"jfk", "two_cities"} {
		wav, ref := speechtest.Fixture(b, name+".wav"), speechtest.ReadText(b, name+".txt")
		for _, c := range []struct{ label, search string }{{"now", ""}, {"package-default", "default"}} {
			b.Run(name+"/"+c.label, func(b *testing.B) {
				p := &speech.Pocketsphinx{Search: c.search}
				var wer float64
				start := childCPU()
				for b.Loop() {
					segs, err := p.Transcribe(context.Background(), wav, "en")
					if err != nil {
						b.Fatal(err)
					}
					texts := make([]string, len(segs))
					for i, s := range segs {
						texts[i] = s.Text
					}
					wer = speechtest.WER(ref, strings.Join(texts, " "))
				}
				b.ReportMetric((childCPU()-start)/float64(b.N), "cpu-s/op")
				b.ReportMetric(wer, "WER")
			})
		}
	}
}

// childCPU is the CPU time, in seconds, of the child processes waited for.
func childCPU() float64 {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano()).Seconds()
}
