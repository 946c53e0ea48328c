package task

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxCancelReason bounds the reason of a cancel, in characters: it becomes
// the task's error ("cancelled: <reason>"), shown wherever the task is.
const MaxCancelReason = 500

// CheckCancelReason refuses a cancel's reason of more than MaxCancelReason
// characters or with control characters (a line break, a tab, an escape):
// every door that cancels a task (the console, dubctl in either mode)
// refuses it with this text before anything changes.
func CheckCancelReason(reason string) error {
	if n := utf8.RuneCountInString(reason); n > MaxCancelReason {
		return fmt.Errorf("reason: %d characters, at most %d", n, MaxCancelReason)
	}
	if strings.IndexFunc(reason, unicode.IsControl) >= 0 {
		return fmt.Errorf("reason: control characters (line breaks, tabs, ...) are not allowed")
	}
	return nil
}
