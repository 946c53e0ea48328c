// Command dubctl is the operators' tool for dubflow: it submits videos to be
// dubbed (upload, task row, first message), follows a task with a progress
// bar, shows a task's steps and segments, and lists recent tasks. It reads
// the same environment as the workers (AMQP_URL, DATABASE_URL, S3_*), so
// `source .devstack/env` points it at the local stack.
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
