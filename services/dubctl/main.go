// Command dubctl is the operators' tool for dubflow: it submits videos to be
// dubbed (upload, task row, first message), follows a task with its
// progress, shows a task's steps, segments and versions, re-dubs a line,
// lists recent tasks and dead letters. It reads the same environment as the
// workers (AMQP_URL, DATABASE_URL, S3_*), so `source .devstack/env` points
// it at the local stack; with CONSOLE_URL and DUBFLOW_API_TOKEN and no
// DATABASE_URL it does the same through the console's API.
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
