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
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
