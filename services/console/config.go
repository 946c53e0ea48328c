package main

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/services/console/internal/auth"
)

// Config is the console's configuration.
type Config struct {
	config.Common
	Limits config.Limits
	config.MediaTools
	// TranslateBatch is how many lines an approval of a task in review
	// puts in one translate message, as asr does (TRANSLATE_BATCH_SIZE).
	config.TranslateBatch
	// HTTPAddr serves the API and the page.
	HTTPAddr string `env:"CONSOLE_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	// APIToken grants everything; ReadToken (optional) grants GET only.
	// APITokens names more tokens (name:token[:readonly],…); the audit log
	// shows a token's name ("admin" and "read" for the two above). One of
	// APIToken and APITokens is required.
	APIToken  string `env:"DUBFLOW_API_TOKEN"`
	ReadToken string `env:"DUBFLOW_API_READ_TOKEN"`
	APITokens string `env:"DUBFLOW_API_TOKENS"`
	// SessionKey signs session cookies; empty derives it from the tokens.
	SessionKey   string `env:"CONSOLE_SESSION_KEY"`
	SessionHours int    `env:"CONSOLE_SESSION_HOURS" envDefault:"12"`
	// LoginPerMinute and LoginBurst bound login attempts per client
	// address (a token bucket).
	LoginPerMinute int `env:"CONSOLE_LOGIN_PER_MINUTE" envDefault:"10"`
	LoginBurst     int `env:"CONSOLE_LOGIN_BURST" envDefault:"5"`
	// PresignSeconds is the lifetime of presigned download links and, up
	// to 15 minutes (maxUploadSeconds), of upload links.
	PresignSeconds int `env:"CONSOLE_PRESIGN_SECONDS" envDefault:"3600"`
	// PublicS3URL is the object store as browsers reach it
	// (http[s]://host[:port]); presigned links and uploads point there.
	// Empty: S3_ENDPOINT, right when browsers reach the store at the same
	// address as the console does. PublicS3Region is the bucket's region
	// (signing needs it; us-east-1 when empty, MinIO's default).
	PublicS3URL    string `env:"CONSOLE_PUBLIC_S3_URL"`
	PublicS3Region string `env:"CONSOLE_PUBLIC_S3_REGION"`
	// PresignUser is the storage user that signs upload policies and download
	// links (S3_PRESIGN_ACCESS_KEY, S3_PRESIGN_SECRET_KEY): it may only
	// write uploads/ and read outputs/. Unset: the main credentials sign,
	// with a warning at start.
	PresignUser config.S3Presign
	// DispatcherURL and DispatcherToken reach the dispatcher's API for the
	// waiting-queue view (empty: the view answers 503).
	DispatcherURL   string `env:"DISPATCHER_URL"`
	DispatcherToken string `env:"DISPATCHER_API_TOKEN"`
	// PrometheusURL, when set, is where GET /api/metrics/history reads its
	// series (Prometheus's HTTP API) instead of the console's own samples.
	PrometheusURL string `env:"PROMETHEUS_URL"`
}

// Validate checks what parsing cannot.
func (c *Config) Validate() error {
	errs := []error{c.Common.Validate(), c.Limits.Validate(), c.TranslateBatch.Validate()}
	errs = append(errs, auth.ValidateTokens(c.APIToken, c.ReadToken, c.APITokens), c.PresignUser.Validate(c.S3))
	if c.ReadToken != "" && len(c.ReadToken) < auth.MinTokenLength {
		errs = append(errs, fmt.Errorf("DUBFLOW_API_READ_TOKEN: want at least %d characters (or unset)", auth.MinTokenLength))
	}
	if c.ReadToken != "" && c.ReadToken == c.APIToken {
		errs = append(errs, errors.New("DUBFLOW_API_READ_TOKEN must differ from DUBFLOW_API_TOKEN"))
	}
	errs = append(errs, config.Between("CONSOLE_SESSION_HOURS", c.SessionHours, 1, 24*30),
		config.Between("CONSOLE_LOGIN_PER_MINUTE", c.LoginPerMinute, 1, 6000), config.Between("CONSOLE_LOGIN_BURST", c.LoginBurst, 1, 1000),
		config.Between("CONSOLE_PRESIGN_SECONDS", c.PresignSeconds, 60, 7*24*3600))
	if c.PublicS3URL != "" {
		if _, err := blob.NewPresigner(c.S3, c.PublicS3URL, c.PublicS3Region); err != nil {
			errs = append(errs, fmt.Errorf("CONSOLE_PUBLIC_S3_URL: %w", err))
		}
	}
	return errors.Join(append(errs, httpURL("DISPATCHER_URL", c.DispatcherURL), httpURL("PROMETHEUS_URL", c.PrometheusURL))...)
}

// httpURL checks that v, when set, is an http:// or https:// URL.
func httpURL(name, v string) error {
	if u, err := url.Parse(v); v != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https")) {
		return fmt.Errorf("%s %q: want http:// or https://", name, v)
	}
	return nil
}

// Presign is PresignSeconds as a duration.
func (c *Config) Presign() time.Duration { return time.Duration(c.PresignSeconds) * time.Second }

// presigner signs the links and uploads browsers use, as the presign
// user (the main credentials when none is set): at PublicS3URL when set,
// else at the store's own endpoint.
func (c *Config) presigner() (*blob.Presigner, error) {
	return blob.NewPresigner(c.PresignUser.Signing(c.S3), c.PublicS3URL, c.PublicS3Region)
}

// newAuth returns the auth of cfg's tokens and session settings.
func newAuth(cfg *Config) *auth.Auth {
	return auth.New(auth.Config{APIToken: cfg.APIToken, ReadToken: cfg.ReadToken, APITokens: cfg.APITokens,
		SessionKey: cfg.SessionKey, Session: time.Duration(cfg.SessionHours) * time.Hour})
}
