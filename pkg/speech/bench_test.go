package speech_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dubflow/dubflow/pkg/speech"
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
