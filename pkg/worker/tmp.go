package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
)

// TempPrefix is the name prefix of the scratch folders a service's steps
// create in the temporary folder (os.MkdirTemp("", TempPrefix(service))),
// by which RemoveStaleTemp knows them: "dubflow-extract_audio-".
func TempPrefix(service string) string { return "dubflow-" + service + "-" }

// minStaleAge is the least age at which a scratch folder counts as stale,
// whatever the step timeouts.
const minStaleAge = time.Hour

// staleAge is how old a service's scratch folder must be before it can only
// be a leftover: a step is cancelled at its timeout and removes its folder,
// so a folder older than twice the longest timeout (at least minStaleAge)
// belongs to no running step, in this process or a sibling on the machine.
func staleAge(routes []step.Route) time.Duration {
	age := minStaleAge
	for _, r := range routes {
		age = max(age, 2*r.Timeout)
	}
	return age
}

// RemoveStaleTemp removes the entries directly under dir whose names start
// with prefix and that were last modified before now minus maxAge: the
// scratch space a crashed earlier process left behind. Nothing else is
// touched (symbolic links are removed, never followed). It returns the
// names removed.
func RemoveStaleTemp(dir, prefix string, maxAge time.Duration, now time.Time) ([]string, error) {
	if !strings.HasPrefix(prefix, "dubflow-") || len(prefix) <= len("dubflow-") {
		return nil, fmt.Errorf("remove stale temporary folders: prefix %q is not a service's", prefix)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("remove stale temporary folders in %s: %w", dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		info, err := e.Info() // lstat: a link is judged, and removed, as a link
		if err != nil || !info.ModTime().Before(now.Add(-maxAge)) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// removeStaleTemp cleans the service's stale scratch folders at start; a
// failure is logged, never fatal.
func (d *Deps) removeStaleTemp(routes []step.Route) {
	removed, err := RemoveStaleTemp(os.TempDir(), TempPrefix(d.Name), staleAge(routes), time.Now())
	if err != nil {
		d.Log.Warn().Err(err).Msg("stale temporary folders not all removed")
	}
	if len(removed) > 0 {
		d.Log.Info().Strs("removed", removed).Str("dir", os.TempDir()).Msg("stale temporary folders removed")
	}
}
