// Package ops serves a service's operational endpoints: /healthz (the
// process is alive), /readyz (it is doing its job: consuming, connected) and
// /metrics (Prometheus).
package ops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// Check reports whether one dependency is ready; a nil error means ready.
type Check func(ctx context.Context) error

// NewRegistry returns a Prometheus registry with the Go and process
// collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler returns the mux serving /healthz, /readyz and /metrics. /readyz
// answers 200 only when every check passes, else 503 naming the failing one.
func Handler(reg *prometheus.Registry, checks map[string]Check) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain")
		for name, check := range checks {
			if err := check(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "%s: %v\n", name, err)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// Serve listens on addr and serves h, the ops endpoints, until ctx is
// cancelled.
func Serve(ctx context.Context, addr string, h http.Handler, log zerolog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	return ServeHTTP(ctx, addr, srv, 5*time.Second, log.With().Str("server", "ops").Logger())
}

// ServeHTTP listens on addr and serves srv until ctx is cancelled, then
// lets requests in flight finish for up to grace and closes the
// connections still open after it (event streams, slow clients).
func ServeHTTP(ctx context.Context, addr string, srv *http.Server, grace time.Duration, log zerolog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	log.Info().Str("addr", ln.Addr().String()).Msg("listening")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", addr, err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("shut down %s: %w", addr, err)
		}
		_ = srv.Close()
		return nil
	}
}

// Every calls f every interval, the first time one interval from now, until
// ctx is cancelled. A call that outlasts the interval delays the next one
// rather than overlapping it.
func Every(ctx context.Context, interval time.Duration, f func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		f(ctx)
	}
}
