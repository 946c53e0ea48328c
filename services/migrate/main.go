// Command migrate prepares dubflow's backing services: it applies the
// Postgres migrations, creates the S3 bucket (with a lifecycle rule that
// expires uploads/ after a day and, with S3_PRESIGN_ACCESS_KEY, the
// storage user that signs what clients get: see storageuser.go) and
// declares the RabbitMQ topology. Every part is
// idempotent; the Kubernetes Job and `make up` run it before the workers
// start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/rs/zerolog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], config.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, environ map[string]string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	skipDB := fs.Bool("skip-db", false, "do not apply the Postgres migrations")
	skipS3 := fs.Bool("skip-s3", false, "do not create the bucket nor the presign user")
	skipAMQP := fs.Bool("skip-amqp", false, "do not declare the RabbitMQ topology")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg Config
	if err := config.Load(environ, &cfg); err != nil {
		return err
	}
	log := zerolog.New(os.Stderr).With().Timestamp().Str("service", "migrate").Logger()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if !*skipDB {
		pool, err := store.Open(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		if err := store.Migrate(ctx, pool); err != nil {
			return err
		}
		log.Info().Msg("database migrated")
	}
	if !*skipS3 {
		if err := prepareS3(ctx, cfg, log); err != nil {
			return err
		}
	}
	if !*skipAMQP {
		topo := broker.Topology{DeliveryLimit: cfg.DeliveryLimit}
		conn, err := broker.Dial(ctx, cfg.AMQPURL, "migrate", log, broker.WithTopology(topo))
		if err != nil {
			return fmt.Errorf("declare topology: %w", err)
		}
		defer conn.Close()
		log.Info().Msg("broker topology declared")
	}
	return nil
}

// Config is what migrate reads: the shared settings and the presign user.
type Config struct {
	config.Common
	Presign config.S3Presign
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	return errors.Join(c.Common.Validate(), c.Presign.Validate(c.S3))
}

// prepareS3 creates the bucket and, when one is configured, the presign
// user.
func prepareS3(ctx context.Context, cfg Config, log zerolog.Logger) error {
	bs, err := blob.New(cfg.S3)
	if err != nil {
		return err
	}
	if err := bs.EnsureBucket(ctx); err != nil {
		return err
	}
	log.Info().Str("bucket", bs.Bucket()).Msg("bucket ready")
	// A backstop behind the console's sweeper, which removes untaken
	// uploads minutes after their policy expired: should no console run
	// for a day, the store removes them itself.
	if err := bs.ExpirePrefix(ctx, uploadsRule, uploadsPrefix, uploadsDays); err != nil {
		log.Warn().Err(err).Msg("no lifecycle rule for uploads/: the console's sweeper alone removes them")
	} else {
		log.Info().Str("prefix", uploadsPrefix).Int("days", uploadsDays).Msg("uploads expire")
	}
	if !cfg.Presign.Set() {
		log.Warn().Msg("no S3_PRESIGN_ACCESS_KEY: no presign user created; the console signs with S3_ACCESS_KEY")
		return nil
	}
	if err := ensurePresignUser(ctx, cfg.S3, cfg.Presign); err != nil {
		return err
	}
	log.Info().Str("user", cfg.Presign.AccessKey).Str("policy", presignPolicyName(cfg.S3.Bucket)).Msg("presign user ready")
	return nil
}

// The bucket lifecycle rule that expires uploads nobody took.
const (
	uploadsRule = "dubflow-uploads"
	uploadsDays = 1
)
