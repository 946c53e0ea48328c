// Command chaos is dubflow's own chaos run (make chaos): it starts a
// private RabbitMQ, Postgres and MinIO, runs the real services against them
// through toxiproxy proxies, submits short real-speech videos with dubctl
// while it kills the services with SIGKILL, restarts and crashes the
// backing services and cuts, stalls and slows their connections, and then
// checks that every task ended done with a valid output and that no effect
// happened twice. It exits 0 when the run passed, 1 when it found a
// defect, 2 when it could not run, 130 when interrupted. Everything it
// started is stopped and removed at the end, also on Ctrl-C (-keep keeps
// the work folder).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dubflow/dubflow/services/chaos/internal/run"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
