package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of dubctl.
const (
	ExitOK          = 0
	ExitFailed      = 1 // an error, or a task that ended failed
	ExitUsage       = 2 // bad flags or arguments
	ExitTimeout     = 3 // wait gave up before the task ended
	ExitCompensated = 4 // the task waits for an operator (tts_requeue)
	ExitReview      = 5 // the task waits in review for a person's edits (dubctl review)
)

// ExitError carries an exit code other than exitFailed out of a command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

func (e *ExitError) Unwrap() error { return e.Err }

// WithCode attaches an exit code to err.
func WithCode(code int, err error) error { return &ExitError{Code: code, Err: err} }

// UsageError marks err as a usage error (exit code 2).
func UsageError(err error) error { return WithCode(ExitUsage, err) }

// QuietError is an outcome already reported on stdout (a failed task shown
// as JSON, say): dubctl exits with its code without printing it again.
type QuietError struct{ Err error }

func (e *QuietError) Error() string { return e.Err.Error() }

func (e *QuietError) Unwrap() error { return e.Err }

// isUsage recognizes cobra's own usage errors (an unknown subcommand, a
// required flag missing).
func isUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "required flag")
}

// ExactArgs is cobra.ExactArgs with a usage exit code.
func ExactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return UsageError(err)
		}
		return nil
	}
}

// Execute runs root with args, its output and errors escaped (Escaper),
// and returns the process exit code: an error is printed once ("dubctl:
// …", unless a QuietError already reported it) and exits with its code.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	stdout, stderr = newEscaper(stdout), newEscaper(stderr)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var quiet *QuietError
	if !errors.As(err, &quiet) {
		fmt.Fprintln(stderr, "dubctl:", err)
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if isUsage(err) {
		return ExitUsage
	}
	return ExitFailed
}
