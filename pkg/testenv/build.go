package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dubflow/dubflow/pkg/localstack"
)

// RepoRoot finds the checkout: the folder holding go.work, from the working
// directory up (localstack.FindRoot).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return localstack.FindRoot(dir)
}

// BuildServices builds the named services (folders under services/) into
// dir with one `go build`, for tests that run them as real processes, with
// the flags scripts/ps-lib.sh gives (as `make build`).
func BuildServices(dir string, names ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	tags, err := exec.Command(filepath.Join(root, "scripts", "ps-lib.sh")).Output()
	if err != nil {
		return fmt.Errorf("scripts/ps-lib.sh: %w", err)
	}
	// The recogniser built as `make build` builds it (PS_LIB).
	args := append([]string{"build", "-o", dir + string(os.PathSeparator)}, strings.Fields(string(tags))...)
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(root, "services", n, "main.go")); err != nil {
			return fmt.Errorf("services/%s has no main.go: %w", n, err)
		}
		args = append(args, "./services/"+n)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	// The ffmpeg fork server next to the binaries, where the workers look
	// for it (as `make build` puts it in bin/).
	if out, err := exec.Command(filepath.Join(root, "scripts", "ffzygote.sh"), dir).CombinedOutput(); err != nil {
		return fmt.Errorf("scripts/ffzygote.sh: %w\n%s", err, out)
	}
	return nil
}
