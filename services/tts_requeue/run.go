package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/worker"
)

// run parses the flags, then runs one pass, or a pass every -every until
// ctx is cancelled.
func run(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tts_requeue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	limit := fs.Int("limit", 100, "re-drive at most this many tasks per pass")
	dryRun := fs.Bool("dry-run", false, "list the tasks without re-driving them")
	every := fs.Duration("every", 0, "run a pass every this long until stopped (0: one pass)")
	running := fs.Bool("running", false, "also re-drive running tasks missing tts audio (the reconciler re-drives their lost messages on its own)")
	minIdle := fs.Duration("min-idle", 2*time.Minute, "with -running: spare running tasks that made progress more recently than this")
	asJSON := fs.Bool("json", false, "print each pass as a JSON array")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *limit < 1 || *limit > 10000 {
		return fmt.Errorf("-limit %d: want 1..10000", *limit)
	}
	if *every < 0 || *minIdle < 0 {
		return errors.New("-every and -min-idle must not be negative")
	}
	var cfg config.Common
	if err := config.Load(environ, &cfg); err != nil {
		return err
	}
	log := worker.NewLogger("tts_requeue", cfg, stderr)
	pool, err := worker.OpenDB(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	conn, err := broker.Dial(ctx, cfg.AMQPURL, "tts_requeue", log,
		broker.WithTopology(broker.Topology{DeliveryLimit: cfg.DeliveryLimit}))
	if err != nil {
		return err
	}
	defer conn.Close()
	pub := broker.NewPublisher(conn)
	defer pub.Close()

	opts := Options{Limit: *limit, Running: *running, MinIdle: *minIdle, DryRun: *dryRun}
	pass := func() error {
		tasks, err := requeue(ctx, pool, pub, opts)
		if *asJSON {
			if tasks == nil {
				tasks = []Task{}
			}
			if jerr := json.NewEncoder(stdout).Encode(tasks); jerr != nil {
				return jerr
			}
		} else {
			for _, t := range tasks {
				if opts.DryRun {
					fmt.Fprintf(stdout, "would requeue task %s (%s): %d segments without audio %v\n",
						t.TaskID, t.Status, len(t.Missing), t.Missing)
					continue
				}
				fmt.Fprintf(stdout, "requeued task %s (%s): %d segments without audio %v, tts attempt %d\n",
					t.TaskID, t.Status, len(t.Missing), t.Missing, t.Attempt)
			}
		}
		log.Info().Int("tasks", len(tasks)).Bool("dry_run", opts.DryRun).Err(err).Msg("tts_requeue pass")
		return err
	}
	if *every == 0 {
		return pass()
	}
	t := time.NewTicker(*every)
	defer t.Stop()
	for {
		if err := pass(); err != nil && ctx.Err() == nil {
			log.Error().Err(err).Msg("tts_requeue pass failed; trying again at the next")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
