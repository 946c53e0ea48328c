package media

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestYieldingToolsRunNice: a tool started with a Yielding context runs at
// that niceness (through the fork server too, when one runs).
func TestYieldingToolsRunNice(t *testing.T) {
	requireTools(t)
	ctx := Yielding(context.Background(), 10)
	s, err := startFFmpeg(ctx, "-f", "lavfi", "-i", "sine=d=30", "-f", "s16le", "pipe:1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	pid := 0
	if s.cmd.job != nil {
		pid = s.cmd.job.pid
	} else {
		pid = s.cmd.cmd.Process.Pid
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	// The fields after the command's name (in parentheses): nice is the
	// 19th field of the line, the 17th after the name.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 17 || fields[16] != "10" {
		t.Fatalf("ffmpeg %d runs at nice %v, want 10 (stat %q)", pid, fields[16], stat)
	}
}
