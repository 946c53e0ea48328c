package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/media"
)

// TestMuxVideoReusesExtractAudiosProbe: with the probe extract_audio
// records (tasks.source_probe) for the bytes mux_video downloads, the step
// starts no ffprobe at all (the output's length comes from its MP4
// header); with a record of other bytes it probes the video itself, once.
// Both dub the video as TestMuxVideo checks.
func TestMuxVideoReusesExtractAudiosProbe(t *testing.T) {
	log := shimFFprobe(t)
	for _, c := range []struct {
		name   string
		stale  bool
		starts int
	}{{"recorded probe of the same bytes", false, 0}, {"recorded probe of other bytes", true, 1}} {
		t.Run(c.name, func(t *testing.T) {
			mc := newMuxCase(t)
			rec, err := media.RecordProbe(mc.video, mc.src)
			if err != nil || rec == nil {
				t.Fatalf("record the probe: %v %v", rec, err)
			}
			if c.stale {
				rec.SHA256 = strings.Repeat("0", 64)
			}
			raw, _ := json.Marshal(rec)
			if _, err := mc.s.DB.Pool.Exec(context.Background(), `UPDATE tasks SET source_probe = $2 WHERE id = $1`,
				mc.id, string(raw)); err != nil {
				t.Fatal(err)
			}
			before := countLines(t, log)
			out := mc.mux(t, nil)
			if got := countLines(t, log) - before; got != c.starts {
				t.Errorf("mux_video started ffprobe %d times, want %d", got, c.starts)
			}
			info, err := media.Probe(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			if d := (info.Duration - mc.src.Duration).Abs(); d > 500e6 || len(info.StreamsOf(media.AudioStream)) != 2 {
				t.Errorf("output %+v, source lasts %s", info, mc.src.Duration)
			}
			mc.checkSideProducts(t)
		})
	}
}

// shimFFprobe puts, first in PATH for the test, an ffprobe that logs a
// line for each start and runs the real one; it returns the log.
func shimFFprobe(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("ffprobe")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "starts.log")
	script := fmt.Sprintf("#!/bin/sh\necho ffprobe >> '%s'\nexec '%s' \"$@\"\n", log, real)
	if err := os.WriteFile(filepath.Join(dir, "ffprobe"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// countLines counts the lines of file (0 when it does not exist).
func countLines(t *testing.T, file string) int {
	t.Helper()
	raw, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(raw), "\n")
}
