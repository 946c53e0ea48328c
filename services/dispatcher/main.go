// Command dispatcher is dubflow's waiting-queue dispatcher: it queues
// visitors waiting for a human support agent and assigns them to agents with
// free capacity, through an HTTP API, the task.waiting_queue messages and a
// periodic scan, safely from any number of replicas.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "dispatcher:", err)
		os.Exit(1)
	}
}
