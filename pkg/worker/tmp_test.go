package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
)

func TestRemoveStaleTempTouchesOnlyOldFoldersOfItsPrefix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	mk := func(name string, mtime time.Time) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(p, "inner"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	mk("dubflow-asr-stale", old)
	mk("dubflow-asr-live", now)
	mk("dubflow-asr_other-stale", old) // another service whose name starts alike
	mk("dubflow-mux_video-stale", old)
	mk("someone-elses", old)
	removed, err := RemoveStaleTemp(dir, TempPrefix("asr"), 2*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if !slices.Equal(removed, []string{"dubflow-asr-stale"}) {
		t.Errorf("removed %v, want only dubflow-asr-stale", removed)
	}
	for _, keep := range []string{"dubflow-asr-live", "dubflow-asr_other-stale", "dubflow-mux_video-stale", "someone-elses/inner"} {
		if _, err := os.Lstat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("%s was touched: %v", keep, err)
		}
	}
	if _, err := RemoveStaleTemp(dir, "", time.Hour, now); err == nil {
		t.Error("an empty prefix was accepted")
	}
}

func TestStaleAgeExceedsEveryTimeout(t *testing.T) {
	t.Parallel()
	if got := staleAge(nil); got != time.Hour {
		t.Errorf("no routes: %v", got)
	}
	if got := staleAge([]step.Route{{Timeout: 10 * time.Minute}, {Timeout: 50 * time.Minute}}); got != 100*time.Minute {
		t.Errorf("staleAge = %v, want twice the longest timeout", got)
	}
}

func TestLimitNamesTheSettingAndIsPermanent(t *testing.T) {
	t.Parallel()
	target := errors.New("too large")
	err := Limit(fmt.Errorf("download x: %w", target), target, "MAX_VIDEO_BYTES", 10)
	if !fault.IsPermanent(err) || !errors.Is(err, target) || err.Error() != "download x: too large (MAX_VIDEO_BYTES=10)" {
		t.Errorf("Limit = %v (permanent %v)", err, fault.IsPermanent(err))
	}
	other := errors.New("connection reset")
	if got := Limit(other, target, "X", 1); got != other {
		t.Errorf("an unrelated error changed: %v", got)
	}
}
