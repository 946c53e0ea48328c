package task_test

import (
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/task"
)

func TestCheckCancelReason(t *testing.T) {
	t.Parallel()
	for reason, want := range map[string]string{
		"":                              "",
		strings.Repeat("é", 500):        "",
		strings.Repeat("r", 501):        "reason: 501 characters, at most 500",
		strings.Repeat("r", 3000):       "reason: 3000 characters, at most 500",
		"first line\nsecond":            "reason: control characters (line breaks, tabs, ...) are not allowed",
		"bell\a":                        "reason: control characters (line breaks, tabs, ...) are not allowed",
		"the customer asked (ticket 7)": "",
	} {
		got := ""
		if err := task.CheckCancelReason(reason); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("CheckCancelReason(%.20q…) = %q, want %q", reason, got, want)
		}
	}
}
