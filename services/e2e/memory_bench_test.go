package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkWorkerMemory dubs a 1-minute and a long (10-minute by default,
// BENCH_LONG_MINUTES=60 for the hour) video, each with freshly started
// workers, and reports for every worker process its own peak resident
// memory (VmHWM) and the peak of its whole process tree — the worker plus
// the ffmpeg, pocketsphinx, apertium and espeak-ng children it runs —
// sampled every 50 ms while the video is dubbed. A worker that streams its
// media stays flat as the video grows.
//
// translate runs with APERTIUM_PIPELINES=-1 (one apertium process per call,
// nothing resident) unless the environment sets APERTIUM_PIPELINES: that is
// the setting for a memory-bounded deployment.
func BenchmarkWorkerMemory(b *testing.B) {
	long := benchLongMinutes(b)
	extra := map[string]string{"APERTIUM_PIPELINES": "-1"}
	if v, ok := os.LookupEnv("APERTIUM_PIPELINES"); ok {
		extra["APERTIUM_PIPELINES"] = v
	}
	peaks := map[int]map[string]treePeak{}
	for _, minutes := range []int{1, long} {
		b.Run(fmt.Sprintf("%dm", minutes), func(b *testing.B) {
			ctx := context.Background()
			video := fixtureVideo(b, ctx, "two_cities.wav", time.Duration(minutes)*time.Minute)
			for i := 0; i < b.N; i++ {
				s := newStack(b, extra)
				s.start(b, append(append([]string{}, workers...), helpers...)...)
				pids := map[string]int{}
				for _, w := range workers {
					pids[w] = s.procs[w].Cmd.Process.Pid
				}
				sampler := sampleTrees(pids, 50*time.Millisecond)
				s.dub(b, ctx, video, time.Duration(10+3*minutes)*time.Minute)
				tree := sampler.stop()
				peak := map[string]treePeak{}
				for _, w := range workers {
					hwm, err := s.procs[w].hwm()
					if err != nil {
						b.Fatal(err)
					}
					p := treePeak{own: hwm, tree: max(tree[w], hwm)}
					peak[w] = p
					b.ReportMetric(float64(p.own)/(1<<20), w+"-MB")
					b.ReportMetric(float64(p.tree)/(1<<20), w+"+children-MB")
				}
				peaks[minutes] = peak
			}
			if minutes == long && peaks[1] != nil {
				b.Log("\n" + memoryReport(peaks[1], peaks[long], long))
			}
		})
	}
}

// treePeak is a worker's own peak (VmHWM) and the peak of the sum of its
// and its descendants' resident memory.
type treePeak struct{ own, tree int64 }

// memoryReport compares the peaks of the short and the long run.
func memoryReport(short, longPeaks map[string]treePeak, long int) string {
	var report strings.Builder
	fmt.Fprintf(&report, "peak RSS per worker: 1-minute vs %d-minute video (worker alone | worker + children)\n", long)
	for _, w := range workers {
		a, z := short[w], longPeaks[w]
		fmt.Fprintf(&report, "%-14s %7.1f MB %7.1f MB x%.2f | %7.1f MB %7.1f MB x%.2f\n", w,
			mb(a.own), mb(z.own), float64(z.own)/float64(a.own),
			mb(a.tree), mb(z.tree), float64(z.tree)/float64(a.tree))
	}
	return report.String()
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// treeSampler polls /proc for the resident memory of process trees.
type treeSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	peak map[string]int64
}

// sampleTrees starts sampling the trees rooted at pids every interval
// until stop.
func sampleTrees(pids map[string]int, interval time.Duration) *treeSampler {
	s := &treeSampler{done: make(chan struct{}), peak: map[string]int64{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			procs := readProcs()
			s.mu.Lock()
			for name, pid := range pids {
				if rss := procs.treeRSS(pid); rss > s.peak[name] {
					s.peak[name] = rss
				}
			}
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns each tree's peak in bytes.
func (s *treeSampler) stop() map[string]int64 {
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// procTable is one reading of /proc: each process's parent and resident
// memory in bytes.
type procTable struct {
	children map[int][]int
	rss      map[int]int64
}

func readProcs() procTable {
	t := procTable{children: map[int][]int{}, rss: map[int]int64{}}
	entries, _ := os.ReadDir("/proc")
	page := int64(os.Getpagesize())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // the process ended between the listing and the read
		}
		// The command name (field 2) may hold spaces and parentheses: the
		// fields after it start after the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		// f[0] is field 3 (state): ppid is field 4, rss (pages) field 24.
		if len(f) < 22 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pages, _ := strconv.ParseInt(f[21], 10, 64)
		t.children[ppid] = append(t.children[ppid], pid)
		t.rss[pid] = pages * page
	}
	return t
}

// treeRSS sums the resident memory of pid and all its descendants.
func (t procTable) treeRSS(pid int) int64 {
	total := t.rss[pid]
	for _, c := range t.children[pid] {
		total += t.treeRSS(c)
	}
	return total
}
