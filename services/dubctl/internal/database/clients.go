package database

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// connectTimeout bounds each connection dubctl opens: a tool should say
// what is unreachable rather than wait for it.
const connectTimeout = 10 * time.Second

// Config is dubctl's configuration: the workers' common settings, read from
// the environment, and the console's settings of presigned links, which
// database mode signs as the console does (view.SignLinks), so that
// `status --json` shows the same links in both modes.
type Config struct {
	config.Common
	// PresignSeconds, PublicS3URL and PublicS3Region are the console's
	// (CONSOLE_PRESIGN_SECONDS, CONSOLE_PUBLIC_S3_URL,
	// CONSOLE_PUBLIC_S3_REGION): the lifetime of links and the object
	// store as their readers reach it.
	PresignSeconds int    `env:"CONSOLE_PRESIGN_SECONDS" envDefault:"3600"`
	PublicS3URL    string `env:"CONSOLE_PUBLIC_S3_URL"`
	PublicS3Region string `env:"CONSOLE_PUBLIC_S3_REGION"`
	// PresignUser is the console's signing user (S3_PRESIGN_*): links are
	// signed as it, as the console signs them.
	PresignUser config.S3Presign
	// TranslateBatch is how many lines an approval of a task in review
	// puts in one translate message (TRANSLATE_BATCH_SIZE), as the console
	// and asr do.
	config.TranslateBatch
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.PresignUser.Validate(c.S3), c.TranslateBatch.Validate()}
	if c.PresignSeconds < 60 || c.PresignSeconds > 7*24*3600 {
		errs = append(errs, fmt.Errorf("CONSOLE_PRESIGN_SECONDS %d: want 60..604800", c.PresignSeconds))
	}
	if c.PublicS3URL != "" {
		if _, err := blob.NewPresigner(c.S3, c.PublicS3URL, c.PublicS3Region); err != nil {
			errs = append(errs, fmt.Errorf("CONSOLE_PUBLIC_S3_URL: %w", err))
		}
	}
	return errors.Join(errs...)
}

// presigner signs links as the console does: as the presign user (the
// main credentials when none is set), at PublicS3URL when set, else at the
// store's own endpoint.
func (c *clients) presigner(context.Context) (*blob.Presigner, error) {
	return blob.NewPresigner(c.cfg.PresignUser.Signing(c.cfg.S3), c.cfg.PublicS3URL, c.cfg.PublicS3Region)
}

// loadConfig reads the configuration from the process environment.
func loadConfig() (Config, error) {
	var cfg Config
	if err := config.Load(config.Environ(), &cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// clients are the connections a command opened; close releases them.
// Each is opened on first use.
type clients struct {
	cfg     Config
	pool    *pgxpool.Pool
	store   *blob.Store
	pubConn *broker.Conn
	pub     *broker.Publisher
}

// newClients loads the configuration; nothing is connected yet.
func newClients() (*clients, error) {
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	return &clients{cfg: cfg}, nil
}

// db returns the Postgres pool, connecting on first use.
func (c *clients) db(ctx context.Context) (*pgxpool.Pool, error) {
	if c.pool != nil {
		return c.pool, nil
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	pool, err := store.Open(ctx, c.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to database %s: %w", config.Redact(c.cfg.DatabaseURL), oneLine(err))
	}
	c.pool = pool
	return pool, nil
}

// blob returns the object store, checking on first use that the bucket
// answers.
func (c *clients) blob(ctx context.Context) (*blob.Store, error) {
	if c.store != nil {
		return c.store, nil
	}
	s, err := blob.New(c.cfg.S3)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		return nil, fmt.Errorf("reach object store %s: %w", s3URL(c.cfg.S3), oneLine(err))
	}
	c.store = s
	return s, nil
}

// publisher returns a confirming publisher, dialing the broker on first
// use.
func (c *clients) publisher(ctx context.Context) (*broker.Publisher, error) {
	if c.pub != nil {
		return c.pub, nil
	}
	dctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := broker.Dial(dctx, c.cfg.AMQPURL, "dubctl", zerolog.Nop(),
		broker.WithTopology(broker.Topology{DeliveryLimit: c.cfg.DeliveryLimit}))
	if err != nil {
		return nil, fmt.Errorf("connect to broker %s: %w", config.Redact(c.cfg.AMQPURL), oneLine(err))
	}
	c.pubConn = conn
	c.pub = broker.NewPublisher(conn)
	return c.pub, nil
}

// close releases what was opened.
func (c *clients) close() {
	if c.pub != nil {
		_ = c.pub.Close()
	}
	if c.pubConn != nil {
		_ = c.pubConn.Close()
	}
	if c.pool != nil {
		c.pool.Close()
	}
}

// s3URL names the object store for messages, without credentials.
func s3URL(s config.S3) string {
	scheme := "http"
	if s.UseSSL {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s/%s", scheme, s.Endpoint, s.Bucket)
}

// oneLine keeps the last cause of a joined error chain on one line (Dial
// joins the context's error with the last connect error).
func oneLine(err error) error {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		errs := joined.Unwrap()
		for i := len(errs) - 1; i >= 0; i-- {
			if errs[i] != nil && !errors.Is(errs[i], context.DeadlineExceeded) {
				return errs[i]
			}
		}
	}
	return err
}
