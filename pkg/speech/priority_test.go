package speech

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLongChunksYield runs a chunk through Chunker.TranscribeChunk with a
// stand-in recogniser that records its own niceness: with Nice set, a
// chunk of at least half ChunkSeconds is decoded Nice steps nicer than the
// worker (at most 19: a worker run at nice 19 never raises it), a shorter
// one at the worker's priority; without, every chunk at the worker's.
func TestLongChunksYield(t *testing.T) {
	dir := t.TempDir()
	// The priority is set just after the program starts: wait for it to
	// change (up to 3 s), then record it.
	script := filepath.Join(dir, "recogniser")
	body := `#!/bin/sh
for i in $(seq 30); do
  n=$(cut -d' ' -f19 /proc/$$/stat)
  [ "$n" != "$OWN_NICE" ] && break
  sleep 0.1
done
echo "$n" > "$NICE_FILE"
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	own, err := strconv.Atoi(strings.Fields(readProcStat(t))[16]) // field 19, nice
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OWN_NICE", strconv.Itoa(own))
	yielded := strconv.Itoa(min(own+5, 19))
	for _, tc := range []struct {
		name     string
		nice     int
		seconds  int
		leadMS   int
		wantNice string
	}{
		{"long", 5, 6, 0, yielded},
		{"short", 5, 4, 0, strconv.Itoa(own)},
		{"long with its lead-in, short without", 5, 6, 2000, strconv.Itoa(own)},
		{"long, Nice unset", 0, 6, 0, strconv.Itoa(own)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Chunker{Engine: &Pocketsphinx{Command: script}, ChunkSeconds: 10, TempDir: dir, Nice: tc.nice}
			wav, err := c.writeChunk(nil, make([]byte, 2*16000*tc.seconds), 16000, 0)
			if err != nil {
				t.Fatal(err)
			}
			niceFile := filepath.Join(dir, "nice")
			t.Setenv("NICE_FILE", niceFile)
			if _, err := c.TranscribeChunk(context.Background(), Chunk{Path: wav, LeadMS: tc.leadMS}, "en"); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(niceFile)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(string(got)) != tc.wantNice {
				t.Errorf("recogniser ran at niceness %s, want %s", strings.TrimSpace(string(got)), tc.wantNice)
			}
		})
	}
}

func readProcStat(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	s := string(b)
	return s[strings.LastIndexByte(s, ')')+2:] // after "pid (comm) "
}
