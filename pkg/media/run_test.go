package media

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocalInput(t *testing.T) {
	dir := t.TempDir()
	hostile := filepath.Join(dir, "-i")
	if err := os.WriteFile(hostile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := localInput(hostile)
	if err != nil || got != "file:"+hostile {
		t.Errorf("localInput(%q) = %q, %v; want the file: form", hostile, got, err)
	}
	for _, bad := range []string{"", "-i", "-f", "http://h/x.mp4", "rtmp://h/live", "concat:a.mp4|b.mp4", "subfile:,,start,0,end,0,,:x.mp4", "pipe:0", "a\nb.mp4", dir, "/dev/null"} {
		if _, err := localInput(bad); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("localInput(%q): got %v, want ErrUnsafePath", bad, err)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{limit: 10}
	b.Write([]byte("0123456789"))
	if b.String() != "0123456789" {
		t.Errorf("got %q", b.String())
	}
	b.Write([]byte("abcdef"))
	if got := b.String(); got != "...6789abcdef" {
		t.Errorf("got %q, want the last 10 bytes marked as cut", got)
	}
}

func TestCapBuffer(t *testing.T) {
	c := &capBuffer{limit: 5}
	n, err := c.Write([]byte("abc"))
	if n != 3 || err != nil || c.over {
		t.Fatalf("write: %d %v over=%v", n, err, c.over)
	}
	c.Write([]byte("defgh"))
	if !c.over || c.String() != "abcde" {
		t.Errorf("kept %q over=%v, want the first 5 bytes and an overflow", c.String(), c.over)
	}
	if !strings.HasPrefix(c.String(), "abc") {
		t.Error("lost the start")
	}
}
