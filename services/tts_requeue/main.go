// Command tts_requeue re-drives speech synthesis that is still missing: it
// finds tasks past translation whose segments lack audio (tts_audio_key
// empty) — tasks parked in compensating after the TTS engine failed, or
// running tasks whose tts step is not running — and publishes one task.tts
// message per task (not per segment) with a fresh retry budget. The tts
// worker then synthesizes only the segments without audio.
//
//	tts_requeue -limit 100            re-drive at most 100 tasks, once
//	tts_requeue -dry-run              list them without re-driving
//	tts_requeue -every 5m             re-drive every 5 minutes until stopped
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
	if err := run(ctx, os.Args[1:], config.Environ(), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tts_requeue:", err)
		os.Exit(1)
	}
}
