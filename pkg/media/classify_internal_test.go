package media

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/fault"
)

// A probe killed by a signal says nothing about the file: it is retried,
// while a probe that exits with an error on the file is permanent.
func TestProbeKilledBySignalIsNotPermanent(t *testing.T) {
	sh := func(script string) error {
		return (&command{ctx: context.Background(), name: "sh", args: []string{"-c", script}}).Run()
	}
	killed := sh("kill -TERM $$")
	if killed == nil {
		t.Fatal("sh survived its own SIGTERM")
	}
	if err := classifyProbeError("in.mp4", "", killed); fault.IsPermanent(err) {
		t.Fatalf("killed probe classified permanent: %v", err)
	}
	failed := sh("exit 1")
	if err := classifyProbeError("in.mp4", "", failed); !fault.IsPermanent(err) {
		t.Fatalf("a probe that exited 1 on the file is not permanent: %v", err)
	}
}

// TestProbeRefusalNamesNoProcessDetails: random bytes that ffprobe takes
// for an MP3 frame are "not a media file", with what it could not read and
// without its log context's addresses.
func TestProbeRefusalNamesNoProcessDetails(t *testing.T) {
	failed := (&command{ctx: context.Background(), name: "sh", args: []string{"-c", "exit 1"}}).Run()
	stderr := "[mp3 @ 0x564c025d52c0] Failed to read frame size: Could not seek to 3071.\nin.mp4: Invalid argument\n"
	err := classifyProbeError("in.mp4", stderr, failed)
	want := "not a media file: in.mp4 could not be read (Failed to read frame size: Could not seek to 3071.)"
	if !fault.IsPermanent(err) || err.Error() != want {
		t.Fatalf("got %v, want %q (permanent)", err, want)
	}
}
