package localstack

import (
	"os"
	"path/filepath"
	"testing"
)

// FreeAddr never hands out one address twice in a process, though the kernel
// may give a port again as soon as its listener is closed.
func TestFreeAddrNeverRepeats(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 500 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("FreeAddr returned %s twice", addr)
		}
		seen[addr] = true
	}
}

// FindRoot finds the checkout from a folder inside it, and says so when
// there is none above.
func TestFindRoot(t *testing.T) {
	t.Parallel()
	root, err := FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "pkg", "localstack"); wd != want {
		t.Errorf("FindRoot(.) = %s, want the folder two above %s", root, wd)
	}
	if got, err := FindRoot(t.TempDir()); err == nil {
		t.Errorf("FindRoot of a fresh temporary folder = %s, want an error", got)
	}
}
