package main

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
	exitOK          = 0
	exitFailed      = 1 // an error, or a task that ended failed
	exitUsage       = 2 // bad flags or arguments
	exitTimeout     = 3 // wait gave up before the task ended
	exitCompensated = 4 // the task waits for an operator (tts_requeue)
	exitReview      = 5 // the task waits in review for a person's edits (dubctl review)
)

// newRootCmd builds dubctl's command tree afresh: every run gets its own
// commands and flags, so execute can run many times in one process.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "dubctl",
		Short: "Submit, follow and inspect dubflow tasks",
		Long: `dubctl submits videos to dubflow and follows the tasks.

It reads the workers' environment: AMQP_URL, DATABASE_URL, S3_ENDPOINT,
S3_ACCESS_KEY, S3_SECRET_KEY, S3_BUCKET, S3_USE_SSL (with the local stack's
defaults); "source .devstack/env" points it at the stack "make up" started.
With CONSOLE_URL and DUBFLOW_API_TOKEN set and DATABASE_URL unset, it talks
to the console's API instead, with the same commands and the same output.

Exit codes: 0 success, 1 error or failed task, 2 usage, 3 timeout,
4 task compensating (waits for tts_requeue), 5 task in review (waits for a
person's edits: dubctl review).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(submitCmd(), waitCmd(), statusCmd(), listCmd(), dlqCmd(), sampleCmd())
	root.AddCommand(segmentsCmd(), redubCmd(), versionsCmd(), reviewCmd())
	root.AddCommand(searchCmd(), cancelCmd(), retryCmd(), timelineCmd(), queuesCmd(), compensationsCmd(), auditCmd())
	root.AddCommand(workersCmd(), configCmd(), projectCmd(), tokenCmd())
	root.PersistentFlags().String("as", "", "database mode: who acts, as the audit log names them (default: the operating-system user)")
	return root
}

// exitError carries an exit code other than exitFailed out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode attaches an exit code to err.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// usageError marks err as a usage error (exit code 2).
func usageError(err error) error { return withCode(exitUsage, err) }

// execute runs dubctl with args and returns the process exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	stdout, stderr = newEscaper(stdout), newEscaper(stderr) // escape.go
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var quiet *quietError
	if !errors.As(err, &quiet) {
		fmt.Fprintln(stderr, "dubctl:", err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if isUsage(err) {
		return exitUsage
	}
	return exitFailed
}

// quietError is an outcome already reported on stdout (a failed task shown
// as JSON, say): dubctl exits with its code without printing it again.
type quietError struct{ err error }

func (e *quietError) Error() string { return e.err.Error() }
func (e *quietError) Unwrap() error { return e.err }

// isUsage recognizes cobra's own usage errors (an unknown subcommand, a
// required flag missing).
func isUsage(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "required flag")
}

// exactArgs is cobra.ExactArgs with a usage exit code.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError(err)
		}
		return nil
	}
}
