package cores

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestQuota(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		file string
		want int
		ok   bool
	}{
		{"max 100000\n", 0, false},
		{"150000 100000\n", 2, true},
		{"100000 100000\n", 1, true},
		{"50000 100000\n", 1, true},
		{"800000 100000", 8, true},
		{"garbage", 0, false},
	} {
		p := filepath.Join(dir, "cpu.max")
		if err := os.WriteFile(p, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		got, ok := quota(p)
		if got != tc.want || ok != tc.ok {
			t.Errorf("quota(%q) = %d, %v; want %d, %v", tc.file, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := quota(filepath.Join(dir, "missing")); ok {
		t.Error("a missing cpu.max is a quota")
	}
}

func TestUsableBoundedByQuota(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cpu.max")
	if err := os.WriteFile(p, []byte("100000 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := cgroupCPUMax
	t.Cleanup(func() { cgroupCPUMax = old })
	cgroupCPUMax = p
	if got := Usable(); got != 1 {
		t.Errorf("Usable with a one-core quota = %d, want 1", got)
	}
	cgroupCPUMax = filepath.Join(t.TempDir(), "none")
	if got := Usable(); got != runtime.NumCPU() {
		t.Errorf("Usable without a quota = %d, want NumCPU %d", got, runtime.NumCPU())
	}
}
