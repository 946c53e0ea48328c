package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
)

// BenchmarkWorkerMemory dubs a 1-minute and a long (BENCH_MEMORY_MINUTES,
// the hour by default) video, each with freshly started
// workers, and reports for every worker process its own peak resident
// memory (VmHWM) and the peak of its whole process tree — the worker plus
// the ffmpeg, pocketsphinx, apertium and espeak-ng children it runs —
// sampled every 50 ms while the video is dubbed, as the sum of proportional
// set sizes (PSS: a page shared by several processes of the tree, such as a
// shared library, counted once, as a node's memory sees it) and as the sum
// of resident set sizes (each process's shared pages counted again: an upper
// bound). A worker that streams its media stays flat as the video grows.
//
// translate runs with its default, one resident Apertium pipeline, unless
// the environment sets APERTIUM_PIPELINES (-1: one apertium process per
// call). A call's process reaches the same peak as the resident pipeline
// (all dozen stages loaded at once, ~115 MB PSS for eng-spa) at a
// random moment of its start, so the one-per-call setting saves memory
// only between calls, not at the peak this measures.
//
// With -v the report names, for the long video, what each tree held at its
// peak: each process above 1 MB.
func BenchmarkWorkerMemory(b *testing.B) {
	long := envWhole(b, "BENCH_MEMORY_MINUTES", 60, 2)
	extra := map[string]string{}
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
					p := treePeak{own: hwm, pss: tree[w].pss, rss: max(tree[w].rss, hwm), at: tree[w].at}
					peak[w] = p
					b.ReportMetric(mb(p.own), w+"-MB")
					b.ReportMetric(mb(p.pss), w+"+children-PSS-MB")
					b.ReportMetric(mb(p.rss), w+"+children-RSS-MB")
				}
				peaks[minutes] = peak
			}
			if minutes == long && peaks[1] != nil {
				fmt.Print(memoryReport(peaks[1], peaks[long], long)) // not the log, which is cut
			}
		})
	}
}

// treePeak is a worker's own peak (VmHWM) and the peaks of the sums of its
// and its descendants' proportional and resident set sizes.
type treePeak struct {
	own, pss, rss int64
	at            string // the processes at the PSS peak
}

// memoryReport compares the peaks of the short and the long run.
func memoryReport(short, longPeaks map[string]treePeak, long int) string {
	var report strings.Builder
	fmt.Fprintf(&report, "peak memory per worker, 1-minute vs %d-minute video: worker alone (VmHWM) | worker + children, PSS | worker + children, RSS summed\n", long)
	for _, w := range workers {
		a, z := short[w], longPeaks[w]
		fmt.Fprintf(&report, "%-14s %6.1f %6.1f MB x%.2f | %6.1f %6.1f MB x%.2f | %6.1f %6.1f MB x%.2f\n", w,
			mb(a.own), mb(z.own), float64(z.own)/float64(a.own),
			mb(a.pss), mb(z.pss), float64(z.pss)/float64(a.pss),
			mb(a.rss), mb(z.rss), float64(z.rss)/float64(a.rss))
	}
	fmt.Fprintf(&report, "at the %d-minute video's PSS peak (MB):\n", long)
	for _, w := range workers {
		fmt.Fprintf(&report, "%-14s %s\n", w, longPeaks[w].at)
	}
	return report.String()
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// treeSampler polls /proc for the resident memory of process trees.
type treeSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	peak map[string]memory
}

// memory is a process tree's summed proportional and resident set sizes,
// in bytes; at the peak, at names what made it up.
type memory struct {
	pss, rss int64
	at       string
}

// sampleTrees starts sampling the trees rooted at pids every interval
// until stop.
func sampleTrees(pids map[string]int, interval time.Duration) *treeSampler {
	s := &treeSampler{done: make(chan struct{}), peak: map[string]memory{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		roots := make([]int, 0, len(pids))
		for _, pid := range pids {
			roots = append(roots, pid)
		}
		for {
			procs := readProcs(roots)
			s.mu.Lock()
			for name, pid := range pids {
				m := procs.tree(pid)
				p := s.peak[name]
				if m.pss > p.pss {
					p.pss, p.at = m.pss, procs.describe(pid)
				}
				p.rss = max(p.rss, m.rss)
				s.peak[name] = p
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

// stop ends the sampling and returns each tree's peaks.
func (s *treeSampler) stop() map[string]memory {
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// readProcs reads the trees rooted at roots: each process's children
// (from /proc/PID/task/TID/children: a child may be started from any of the
// process's threads) and its resident memory in bytes. It reads only the
// trees' processes, not all of /proc, so that sampling often costs little.
//
// A worker's child still running the worker's program is one caught
// between Go's fork (clone with CLONE_VM: it shares the parent's memory)
// and its exec: its smaps report the parent's pages again, so it is left
// out rather than counted twice (at 50 ms it was, now and then:
// "translate=21" under translate at the peak). Deeper down the same program
// is a real process: the jobs an ffmpeg fork server forks (pkg/media
// zygote) run ffmpeg as their parent does, and count.
func readProcs(roots []int) procTable {
	t := procTable{children: map[int][]int{}, rss: map[int]int64{}, pss: map[int]int64{}, comm: map[int]string{}}
	page := int64(os.Getpagesize())
	exe := func(pid int) string {
		p, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return p
	}
	var visit func(pid int, root bool)
	visit = func(pid int, root bool) {
		statm, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
		if err != nil {
			return // the process ended
		}
		if f := strings.Fields(string(statm)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			t.rss[pid] = pages * page
		}
		t.pss[pid] = pss(pid)
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		t.comm[pid] = strings.TrimSpace(string(comm))
		threads, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
		for _, th := range threads {
			b, err := os.ReadFile(th)
			if err != nil {
				continue
			}
			for _, c := range strings.Fields(string(b)) {
				child, err := strconv.Atoi(c)
				if err != nil {
					continue
				}
				if prog := exe(child); root && prog != "" && prog == exe(pid) {
					continue // forked, not yet exec'd: the worker's memory
				}
				t.children[pid] = append(t.children[pid], child)
				visit(child, false)
			}
		}
	}
	for _, pid := range roots {
		visit(pid, true)
	}
	return t
}

// procTable is one reading of process trees: each process's children,
// resident and proportional set sizes in bytes (PSS 0: it ended before it
// was read) and name.
type procTable struct {
	children map[int][]int
	rss, pss map[int]int64
	comm     map[int]string
}

// tree sums the memory of pid and all its descendants. A process that
// ended before its PSS was read adds no PSS: it holds nothing any more,
// and its RSS (counted before, as a stand-in) also counts every shared
// library page the live processes already share (an exiting ffmpeg added
// 74 MB to mux_video's peak that way).
func (t procTable) tree(pid int) memory {
	m := memory{rss: t.rss[pid], pss: t.pss[pid]}
	for _, c := range t.children[pid] {
		sub := t.tree(c)
		m.pss += sub.pss
		m.rss += sub.rss
	}
	return m
}

// describe lists pid and its descendants above 1 MB as name=PSS in MB.
func (t procTable) describe(pid int) string {
	var parts []string
	var walk func(pid int)
	walk = func(pid int) {
		if m := t.pss[pid]; m >= 1<<20 {
			parts = append(parts, fmt.Sprintf("%s=%.0f", t.comm[pid], mb(m)))
		}
		for _, c := range t.children[pid] {
			walk(c)
		}
	}
	walk(pid)
	return strings.Join(parts, " ")
}

// pss reads a process's proportional set size from
// /proc/PID/smaps_rollup, in bytes (0 if it cannot be read).
func pss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// The memory benchmark's sampler finds a process's children and grandchildren
// and counts their memory.
func TestTreeSamplerCountsChildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	self := os.Getpid()
	var procs procTable
	sh := cmd.Process.Pid
	if !testenv.Poll(time.Now().Add(testenv.Within(t, 10*time.Second)), func() bool {
		procs = readProcs([]int{self})
		return len(procs.children[sh]) == 1
	}) {
		t.Fatalf("sh %d: children %v, want the sleep", sh, procs.children[sh])
	}
	sleep := procs.children[sh][0]
	alone := procs.tree(sleep)
	if procs.rss[sleep] <= 0 || alone.pss <= 0 {
		t.Fatalf("sleep %d: rss %d, pss %d", sleep, procs.rss[sleep], alone.pss)
	}
	whole, withoutChildren := procs.tree(self), procs.rss[self]
	if whole.rss < withoutChildren+procs.rss[sh]+procs.rss[sleep] {
		t.Fatalf("tree rss %d < self %d + sh %d + sleep %d", whole.rss, withoutChildren, procs.rss[sh], procs.rss[sleep])
	}
}

// Below a worker, a child running its parent's program is a process of its
// own (an ffmpeg fork server's job runs ffmpeg as the server does) and
// counts; only a worker's own child before its exec is left out.
func TestTreeSamplerCountsJobsOfAForkServer(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sh -c 'sleep 30; true' & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	outer := cmd.Process.Pid
	var procs procTable
	if !testenv.Poll(time.Now().Add(testenv.Within(t, 10*time.Second)), func() bool {
		procs = readProcs([]int{os.Getpid()})
		kids := procs.children[outer]
		return len(kids) == 1 && len(procs.children[kids[0]]) == 1
	}) {
		t.Fatalf("sh %d: children %v, want the inner sh (same program) and its sleep", outer, procs.children[outer])
	}
	inner := procs.children[outer][0]
	if procs.comm[inner] != procs.comm[outer] {
		t.Fatalf("inner %q, outer %q: want the same program", procs.comm[inner], procs.comm[outer])
	}
	if procs.tree(outer).pss <= procs.pss[outer] {
		t.Fatal("the inner sh and its sleep added no memory to the outer sh's tree")
	}
}
