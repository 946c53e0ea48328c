package service

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/rs/zerolog"
)

// process returns a Process with no connections, serving its ops endpoints
// on a free port, and that port's base URL.
func process(t *testing.T, checks map[string]ops.Check) (*Process, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &Process{Name: "svc", Config: config.Common{OpsAddr: addr}, Log: zerolog.New(io.Discard),
		Registry: ops.NewRegistry(), checks: checks}
	return p, "http://" + addr
}

// get returns the status and body of url, or 0 when nothing answers.
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A stopping service stays observable: after the signal its ops endpoints
// answer until every job has returned, then Run returns nil.
func TestRunServesOpsUntilEveryJobHasStopped(t *testing.T) {
	t.Parallel()
	p, base := process(t, map[string]ops.Check{})
	draining, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Run(ctx, func(ctx context.Context) error {
			<-ctx.Done()
			close(draining)
			<-release // in-flight work finishing
			return nil
		})
	}()
	testenv.EventuallyWithin(t, 20*time.Second, "ops to answer", func() bool { code, _ := get(base + "/healthz"); return code == 200 })
	cancel()
	<-draining
	if code, _ := get(base + "/healthz"); code != 200 {
		t.Fatalf("/healthz while a job drains = %d, want 200", code)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after a graceful stop", err)
	}
	if code, _ := get(base + "/healthz"); code != 0 {
		t.Fatalf("/healthz after Run returned = %d, want no answer", code)
	}
}

// A failing job stops the others and Run returns its error under the
// service's name.
func TestRunStopsEveryJobWhenOneFails(t *testing.T) {
	t.Parallel()
	p, _ := process(t, map[string]ops.Check{})
	stopped := make(chan struct{})
	err := p.Run(context.Background(),
		func(ctx context.Context) error { <-ctx.Done(); close(stopped); return nil },
		func(context.Context) error { return errors.New("queue gone") })
	if err == nil || err.Error() != "svc: queue gone" {
		t.Fatalf("Run = %v, want svc: queue gone", err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the other job was not stopped")
	}
}

// /readyz answers 503 naming a failing check added with Ready, and 200 once
// it passes.
func TestReadyChecksAreServed(t *testing.T) {
	t.Parallel()
	p, base := process(t, map[string]ops.Check{})
	ready := make(chan struct{})
	p.Ready("consumer", func(context.Context) error {
		select {
		case <-ready:
			return nil
		default:
			return errors.New("not consuming")
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, func(ctx context.Context) error { <-ctx.Done(); return nil }) }()
	testenv.EventuallyWithin(t, 20*time.Second, "ops to answer", func() bool { code, _ := get(base + "/healthz"); return code == 200 })
	if code, body := get(base + "/readyz"); code != 503 || !strings.Contains(body, "consumer: not consuming") {
		t.Errorf("/readyz before the check passes = %d %q", code, body)
	}
	close(ready)
	if code, _ := get(base + "/readyz"); code != 200 {
		t.Errorf("/readyz after the check passes = %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
