package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// SharedBinaries builds the named services (folders under services/) into
// one folder per checkout that every test binary shares, and returns it.
// `go build -o` relinks only a binary whose sources or flags changed (it
// compares the build ID of the file already there) and puts each binary in
// place with a rename; the builds of test binaries running at once take
// turns (a lock on the folder), so the packages of one `go test` run link
// each service once and none sees a half-written file. The folder is a
// cache, like Go's build cache: it is kept between runs.
func SharedBinaries(names ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "dubflow-testbin-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("shared binaries folder: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("shared binaries lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("shared binaries lock: %w", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	return dir, BuildServices(dir, names...)
}
