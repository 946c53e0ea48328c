// Command tts_requeue re-drives speech synthesis parked for an operator: it
// finds compensating tasks (the TTS engine failed some segments after all
// retries) and publishes one task.tts message per task (not per segment)
// with a fresh retry budget. The tts worker then synthesizes only the
// segments without audio, and a task whose segments all have audio by now
// moves on to mux_video. With -running it also takes running tasks missing
// audio whose tts step is idle (the reconciler re-drives those on its own
// when their message is lost). A task left compensating longer than
// RECONCILE_COMPENSATING_MAX_SECONDS is ended, failed, by the reconciler.
//
//	tts_requeue -limit 100            re-drive at most 100 tasks, once
//	tts_requeue -dry-run              list them without re-driving
//	tts_requeue -every 5m             re-drive every 5 minutes until stopped
package main

import (
	"context"
	"os"

	"github.com/dubflow/dubflow/pkg/service"
)

func main() {
	service.Main("tts_requeue", func(ctx context.Context, environ map[string]string) error {
		return run(ctx, os.Args[1:], environ, os.Stdout, os.Stderr)
	})
}
