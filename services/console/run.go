package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/service"
)

// run is the console until ctx is cancelled: the API and page on
// CONSOLE_HTTP_ADDR, probes and metrics on OPS_ADDR, the events poll.
func run(ctx context.Context, environ map[string]string) error {
	var cfg Config
	p, err := service.Start(ctx, "console", environ, &cfg, service.Migrate(), service.WithBlob())
	if err != nil {
		return err
	}
	defer p.Close()
	signer, err := cfg.presigner(p.Blob)
	if err != nil {
		return err
	}
	p.Log.Info().Str("http_addr", cfg.HTTPAddr).Bool("read_token", cfg.ReadToken != "").
		Bool("dispatcher", cfg.DispatcherURL != "").Str("public_s3", signer.Origin()).Msg("console starting")
	s := &server{cfg: &cfg, log: p.Log, pool: p.Pool, objects: p.Blob, signer: signer, pub: p.Publisher(),
		queues: amqpInspector{conn: p.PublishConn()}, events: newHub(p.Pool, p.Log), auth: newAuth(&cfg), page: page(signer.Origin()),
		logins: newLoginLimiter(cfg.LoginPerMinute, cfg.LoginBurst)}
	p.Registry.MustRegister(newQueueCollector(s.queues))
	return p.Run(ctx,
		func(ctx context.Context) error { return serveAPI(ctx, cfg.HTTPAddr, s.Handler(), cfg.ShutdownGrace()) },
		s.events.run)
}

// serveAPI serves h on addr until ctx is cancelled, then lets requests in
// flight finish for up to grace. No write timeout: event streams and large
// uploads last; a slow header is cut off.
func serveAPI(ctx context.Context, addr string, h http.Handler, grace time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", addr, err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}
