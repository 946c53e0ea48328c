package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// startBudget is how many times each process may start ffprobe and ffmpeg
// for one task of the 11 s jfk clip (process name → tool → starts). Each
// start costs ~0.24 CPU-s of loading the tools' ~215 shared libraries,
// more than the work itself on a short clip. Before issue 32 a task made
// four ffprobe runs (the door, extract_audio, and mux_video twice: the
// source video again and its own output); now the door's probe is
// recorded with the task (tasks.source_probe) and reused by extract_audio
// and mux_video for the same bytes, and mux_video reads its output's
// length from the MP4 header. With the ffmpeg fork server (FFMPEG_ZYGOTE,
// libffzygote.so beside the binaries) a shim sees the server's start, one
// per tool and worker, and none of the jobs it forks: the starts that load
// the libraries are what this counts.
var startBudget = map[string]map[string]int{
	"dubctl":        {"ffprobe": 1, "ffmpeg": 0}, // the door: admit.Limits.Media
	"extract_audio": {"ffprobe": 0, "ffmpeg": 1}, // the extraction
	"asr":           {"ffprobe": 0, "ffmpeg": 0},
	"translate":     {"ffprobe": 0, "ffmpeg": 0},
	"tts":           {"ffprobe": 0, "ffmpeg": 0},
	"mux_video":     {"ffprobe": 0, "ffmpeg": 2}, // the dub track (voice with the soundtrack), the mux
}

// TestProcessStarts dubs the 11 s clip with ffprobe and ffmpeg behind
// shims that log who started them, and holds each process to its budget
// of starts (startBudget).
func TestProcessStarts(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "starts.log")
	shims := filepath.Join(dir, "bin")
	writeShims(t, shims, log, "ffprobe", "ffmpeg")
	s := newStack(t, map[string]string{"PATH": shims + string(os.PathListSeparator) + os.Getenv("PATH")})
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	video := fixtureVideo(t, ctx, "jfk.wav", 0) // the test's own ffmpeg: not behind the shims
	s.dub(t, ctx, video, 8*time.Minute)
	got := readStarts(t, log)
	t.Logf("ffprobe and ffmpeg starts of one task of the 11 s clip, by process:\n%s", startsTable(got))
	if got["extract_audio"]["ffmpeg"] == 0 || got["mux_video"]["ffmpeg"] == 0 {
		t.Fatalf("the shims saw no ffmpeg of extract_audio or mux_video: the count misses starts")
	}
	for name, tools := range got {
		budget, known := startBudget[name]
		if !known {
			t.Errorf("%s started %v: not a process of the dub", name, tools)
			continue
		}
		for tool, n := range tools {
			if n > budget[tool] {
				t.Errorf("%s started %s %d times for one task, budget %d", name, tool, n, budget[tool])
			}
		}
	}
}

// writeShims writes, for each tool, a script in dir that appends the name
// of the process that started it and the tool's name to log, then runs
// the real tool in its place (exec: same process, same arguments).
func writeShims(tb testing.TB, dir, log string, tools ...string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, tool := range tools {
		real, err := exec.LookPath(tool)
		if err != nil {
			tb.Fatal(err)
		}
		// read is the shell's builtin: the shim starts nothing but the tool.
		script := fmt.Sprintf("#!/bin/sh\nread -r parent < /proc/$PPID/comm\necho \"$parent %s\" >> '%s'\nexec '%s' \"$@\"\n",
			tool, log, real)
		if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
}

// readStarts counts the log's lines: process name → tool → starts.
func readStarts(tb testing.TB, log string) map[string]map[string]int {
	tb.Helper()
	out := map[string]map[string]int{}
	f, err := os.Open(log)
	if os.IsNotExist(err) {
		return out
	} else if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parent, tool, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			tb.Fatalf("start log line %q", sc.Text())
		}
		if out[parent] == nil {
			out[parent] = map[string]int{}
		}
		out[parent][tool]++
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// startsTable prints the counts, one process a line.
func startsTable(got map[string]map[string]int) string {
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "  %-14s ffprobe %d  ffmpeg %d\n", n, got[n]["ffprobe"], got[n]["ffmpeg"])
	}
	return b.String()
}
