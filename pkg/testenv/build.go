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
// dir with one `go build`, for tests that run them as real processes.
func BuildServices(dir string, names ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
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
	return nil
}
