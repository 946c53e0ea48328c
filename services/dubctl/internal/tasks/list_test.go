package tasks

import (
	"errors"
	"testing"

	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
)

// TestListOptions: both modes' `list` refuse an unknown status, a limit
// out of the mode's range and a since or until that is no time as usage
// errors.
func TestListOptions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o  listOptions
		ok bool
	}{
		{listOptions{status: "", limit: 20, maxLimit: 200}, true},
		{listOptions{status: "done", limit: 200, maxLimit: 200}, true},
		{listOptions{status: "done", limit: 201, maxLimit: 200}, false},
		{listOptions{status: "done", limit: 5000, maxLimit: 10000}, true},
		{listOptions{status: "finished", limit: 20, maxLimit: 10000}, false},
		{listOptions{status: "", limit: 0, maxLimit: 10000}, false},
		{listOptions{since: "2h", until: "2024-01-02", limit: 20, maxLimit: 20}, true},
		{listOptions{since: "yesterday", limit: 20, maxLimit: 20}, false},
		{listOptions{until: "-2h", limit: 20, maxLimit: 20}, false},
	} {
		_, err := c.o.filter()
		if (err == nil) != c.ok {
			t.Errorf("%+v: error %v, want ok=%v", c.o, err, c.ok)
		}
		var e *cli.ExitError
		if err != nil && (!errors.As(err, &e) || e.Code != cli.ExitUsage) {
			t.Errorf("%+v: %v is not a usage error", c.o, err)
		}
	}
}
