// Command dlq_recorder keeps the failure queues drained and visible. It
// consumes task.dlq and records every dead letter in Postgres — the seed's
// dead-letter envelopes that workers publish and the messages the broker
// dead-letters by itself (rejected, expired, over the delivery limit) —,
// marks the task failed and publishes event.task.failed. It also consumes
// task.tts_compensation and records each message against its segment, so
// segments whose synthesis failed never pile up unseen. A message is acked
// only after its record is committed.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dubflow/dubflow/pkg/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, config.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dlq_recorder:", err)
		os.Exit(1)
	}
}
