// Command dubctl is the operators' tool for dubflow: it submits videos to be
// dubbed (upload, task row, first message), follows a task with its
// progress, shows a task's steps, segments, versions and timeline, re-dubs
// a line, cancels and retries tasks, searches the tasks, replays and purges
// dead letters, pauses steps, re-drives compensating tasks, and reads the
// audit log and the workers: every operator action of the console's API. It
// reads the same environment as the workers (AMQP_URL, DATABASE_URL, S3_*),
// so `source .devstack/env` points it at the local stack; with CONSOLE_URL
// and DUBFLOW_API_TOKEN and no DATABASE_URL it does the same through the
// console's API, with the same output.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/dubflow/dubflow/services/dubctl/internal/admin"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/follow"
	"github.com/dubflow/dubflow/services/dubctl/internal/letters"
	"github.com/dubflow/dubflow/services/dubctl/internal/ops"
	"github.com/dubflow/dubflow/services/dubctl/internal/review"
	"github.com/dubflow/dubflow/services/dubctl/internal/steps"
	"github.com/dubflow/dubflow/services/dubctl/internal/submitting"
	"github.com/dubflow/dubflow/services/dubctl/internal/tasks"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

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
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.UsageError(err) })
	root.AddCommand(submitting.Commands(open[submitting.Backend], followAs[submitting.Backend])...)
	root.AddCommand(tasks.Commands(open[tasks.Backend], followAs[tasks.Backend])...)
	root.AddCommand(follow.Command(open[follow.Backend]), letters.Command(open[letters.Backend]),
		review.Command(open[review.Backend], followAs[review.Backend]))
	root.AddCommand(ops.Commands(open[ops.Backend])...)
	root.AddCommand(admin.Commands(open[admin.Backend])...)
	root.AddCommand(steps.Commands(open[stepsBackend], steps.Printers[retry.Retried, worker.Pause, workerList]{
		Retried: printRetried, Pause: printPause, Workers: printWorkers})...)
	root.PersistentFlags().String("as", "", "database mode: who acts, as the audit log names them (default: the operating-system user)")
	return root
}

// execute runs dubctl with args and returns the process exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Execute(ctx, newRootCmd(), args, stdout, stderr)
}
