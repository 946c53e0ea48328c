package localstack

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FindRoot walks up from dir to the checkout: the folder holding go.work.
func FindRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.work above %s", dir)
		}
		d = parent
	}
}

// Chown gives dir and everything in it to the named user, as a server
// that runs as that user (RabbitMQ's Debian wrapper, PostgreSQL's initdb)
// needs; it does nothing when the process already runs as that user.
func Chown(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if os.Getuid() == uid {
		return nil
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, uid, gid); err != nil {
			return fmt.Errorf("chown to %s (run as root or %s): %w", name, name, err)
		}
		return nil
	})
}

// ProcessAlive reports whether pid names a running (not zombie) process.
func ProcessAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
