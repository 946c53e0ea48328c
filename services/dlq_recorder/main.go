// Command dlq_recorder keeps the failure queues drained and visible. It
// consumes task.dlq and records every dead letter in Postgres — the
// dead-letter envelopes that workers publish and the messages the broker
// dead-letters by itself (rejected, expired, over the delivery limit) —,
// marks the task failed and publishes event.task.failed. It also consumes
// task.tts_compensation and records each message against its segment, so
// segments whose synthesis failed never pile up unseen. A message is acked
// only after its record is committed.
package main

import (
	"context"

	"github.com/dubflow/dubflow/pkg/service"
)

func main() {
	service.Main(name, func(ctx context.Context, environ map[string]string) error {
		return run(ctx, environ, nil)
	})
}
