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
