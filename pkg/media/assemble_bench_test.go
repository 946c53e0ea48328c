package media

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// benchInput is a dubbing timeline built from the speech fixtures: the
// soundtrack is the fixtures played one after another until it lasts
// minutes, and every 4 s a line starts with a 3 s slot and a clip cut from
// the fixtures, 2 to 4.4 s long, so that some clips are padded, some
// stretched, some borrow silence, like a real dub.
type benchInput struct {
	soundtrack string
	placements []Placement
	speech     []Span
	clip       func(int) string
	totalMS    int
}

func makeBenchInput(b testing.TB, dir string, minutes int) benchInput {
	b.Helper()
	var samples []int16
	for _, name := range []string{"jfk.wav", "two_cities.wav"} {
		f, err := os.Open(speechtest.Fixture(b, name))
		if err != nil {
			b.Fatal(err)
		}
		r, err := NewWAVReader(f)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]int16, 1<<20)
		n, _ := r.ReadSamples(buf) // the fixtures are 16 kHz mono, under a minute
		samples = append(samples, buf[:n]...)
		f.Close()
	}
	const rate = 16000
	in := benchInput{totalMS: minutes * 60_000, soundtrack: filepath.Join(dir, fmt.Sprintf("soundtrack-%d.wav", minutes))}
	writeBenchWAV(b, in.soundtrack, rate, int64(in.totalMS)*rate/1000, func(i int64) int16 { return samples[i%int64(len(samples))] })
	var slots []Slot
	for i, start := 0, 500; start+3000 <= in.totalMS; i, start = i+1, start+4000 {
		ms := 2000 + i*379%2400
		clip := filepath.Join(dir, fmt.Sprintf("clip-%d.wav", ms))
		if _, err := os.Stat(clip); err != nil {
			off := int64(i * 7919 % len(samples))
			writeBenchWAV(b, clip, rate, int64(ms)*rate/1000, func(j int64) int16 { return samples[(off+j)%int64(len(samples))] })
		}
		slots = append(slots, Slot{Idx: i, StartMS: start, EndMS: start + 3000, NextStartMS: start + 4000, AudioMS: ms})
		in.speech = append(in.speech, Span{start, start + 3000})
	}
	if len(slots) > 0 {
		slots[len(slots)-1].NextStartMS = 0
	}
	in.placements = Fit(slots, FitOptions{TotalMS: in.totalMS})
	in.clip = func(idx int) string {
		return filepath.Join(dir, fmt.Sprintf("clip-%d.wav", 2000+idx*379%2400))
	}
	return in
}

func writeBenchWAV(b testing.TB, path string, rate int, frames int64, sample func(int64) int16) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w, err := NewWAVWriter(f, rate, 1)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]int16, 0, 1<<14)
	for i := range frames {
		buf = append(buf, sample(i))
		if len(buf) == cap(buf) || i == frames-1 {
			if err := w.WriteSamples(buf); err != nil {
				b.Fatal(err)
			}
			buf = buf[:0]
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAssembleDub times the assembly of the dub track on the same
// input, for 1 and 10 minutes to show how each grows, three ways: the
// per-segment assembly of the voice alone (one ffmpeg per clip), the
// previous one-pass assembly (one ffmpeg filter graph with every stretch,
// the ducking and the loudness measurement, then a second ffmpeg to
// normalize) and AssembleDub — the last two voice alone (none) and with
// the soundtrack ducked (duck), both loudness-normalized.
func BenchmarkAssembleDub(b *testing.B) {
	requireTools(b)
	dir := b.TempDir()
	ctx := context.Background()
	for _, minutes := range []int{1, 10} {
		in := makeBenchInput(b, dir, minutes)
		sum := NewTimingReport(in.placements, FitOptions{TotalMS: in.totalMS}).Summary
		b.Logf("%d min, timing report: %+v", minutes, sum)
		out := filepath.Join(dir, "dub.wav")
		name := fmt.Sprintf("%dmin-%dsegments", minutes, len(in.placements))
		b.Run(name+"/per-segment", func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				if err := assembleDubPerSegment(ctx, in.placements, in.clip, in.totalMS, out); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, mode := range []string{BackgroundNone, BackgroundDuck} {
			for _, way := range []struct {
				name     string
				assemble func(context.Context, DubInput, string) (*MixReport, error)
			}{{"previous", assembleDubOnePass}, {"now", AssembleDub}} {
				b.Run(name+"/"+way.name+"-"+mode, func(b *testing.B) {
					var rep *MixReport
					var err error
					defer reportCPU(b)()
					for b.Loop() {
						// OriginalChannels: mux_video knows them from its probe of the video.
						rep, err = way.assemble(ctx, DubInput{Placements: in.placements, Clip: in.clip, TotalMS: in.totalMS,
							Original: in.soundtrack, OriginalChannels: 1, Speech: in.speech, Mix: MixOptions{Background: mode}}, out)
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(rep.Stretched), "stretched")
					b.ReportMetric(rep.MeasuredLUFS, "LUFS-measured")
				})
			}
		}
	}
}

// reportCPU reports, when the returned func runs, the CPU seconds per
// operation spent by the benchmark and the programs it ran (ffmpeg): on a
// shared machine the wall time says as much about the neighbours.
func reportCPU(b *testing.B) func() {
	start := cpuSeconds()
	return func() { b.ReportMetric((cpuSeconds()-start)/float64(b.N), "cpu-s/op") }
}

func cpuSeconds() float64 {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	t := 0.0
	for _, r := range []syscall.Rusage{self, children} {
		t += time.Duration(r.Utime.Nano() + r.Stime.Nano()).Seconds()
	}
	return t
}
