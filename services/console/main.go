// Command console is dubflow's console: one stateless HTTP service (any
// number of replicas) serving a JSON API under /api/ to submit, watch and
// steer dubbing tasks, read the system's health, replay dead letters,
// re-drive compensation and view the waiting queue, and the web page at /.
// The API's routes are in rooms (internal/…) behind a gate (internal/gate).
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/recovery"
	"github.com/dubflow/dubflow/pkg/service"
	"github.com/dubflow/dubflow/services/console/internal/events"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
	"github.com/dubflow/dubflow/services/console/internal/projectmetrics"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/dubflow/dubflow/services/console/web"
)

func main() { service.Main("console", run) }

// run is the console until ctx is cancelled: the API and page on
// CONSOLE_HTTP_ADDR, probes and metrics on OPS_ADDR, the events poll.
func run(ctx context.Context, environ map[string]string) error {
	var cfg Config
	p, err := service.Start(ctx, "console", environ, &cfg, service.Migrate(), service.WithBlob())
	if err != nil {
		return err
	}
	defer p.Close()
	recovery.AtStart(ctx, p) // logged; the reconciler retries what fails
	if _, err := media.UseZygote(cfg.FFmpegZygote, p.Log); err != nil {
		return err
	}
	signer, err := cfg.presigner()
	if err != nil {
		return err
	}
	if !cfg.PresignUser.Set() {
		p.Log.Warn().Str("user", cfg.S3.AccessKey).Msg("no S3_PRESIGN_ACCESS_KEY: upload policies and download links are signed with S3_ACCESS_KEY, who reaches the whole bucket")
	}
	p.Log.Info().Str("http_addr", cfg.HTTPAddr).Bool("read_token", cfg.ReadToken != "").
		Bool("dispatcher", cfg.DispatcherURL != "").Str("public_s3", signer.Origin()).Msg("console starting")
	s := &server{cfg: &cfg, log: p.Log, pool: p.Pool, objects: p.Blob, signer: signer, pub: p.Publisher(),
		queues: inspect.AMQP{Conn: p.PublishConn()}, events: events.New(p.Pool, p.Log), auth: newAuth(&cfg), page: web.HandlerFor(signer.Origin()),
		logins: ratelimit.New(cfg.LoginPerMinute, cfg.LoginBurst), settings: p.Settings}
	p.Registry.MustRegister(inspect.NewCollector(s.queues), projectmetrics.New(p.Pool))
	// No write timeout on the API: event streams and large uploads last; a slow header is cut off.
	api := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	return p.Run(ctx, func(ctx context.Context) error {
		return ops.ServeHTTP(ctx, cfg.HTTPAddr, api, cfg.ShutdownGrace(), p.Log.With().Str("server", "console").Logger())
	}, s.events.Run, s.sampler(time.Now).Run, s.auditLog().RefusalLoop, s.intake().Uploads().Sweep, s.intake().Idempotency().Sweep)
}
