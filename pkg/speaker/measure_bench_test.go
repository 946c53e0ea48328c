package speaker_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dubflow/dubflow/pkg/speaker"
)

// BenchmarkMeasure measures the voices of ten minutes of speech (the
// two_cities fixture repeated) in 4 s spans: what asr adds, over its
// chunks, to a 10-minute video's ~150 segments.
func BenchmarkMeasure(b *testing.B) {
	dir := b.TempDir()
	list := filepath.Join(dir, "list.txt")
	var lines []byte
	for range 14 {
		lines = append(lines, "file '"+fixture(b, "two_cities.wav")+"'\n"...)
	}
	if err := os.WriteFile(list, lines, 0o644); err != nil {
		b.Fatal(err)
	}
	wav := filepath.Join(dir, "ten.wav")
	ffmpeg(b, "-f", "concat", "-safe", "0", "-i", list, "-t", "600", "-ar", "16000", "-ac", "1", wav)
	var spans []speaker.Span
	for ms := 0; ms+4000 <= 600_000; ms += 4000 {
		spans = append(spans, speaker.Span{StartMS: ms, EndMS: ms + 3500})
	}
	b.ResetTimer()
	for range b.N {
		f, err := os.Open(wav)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := speaker.Measure(f, spans); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
