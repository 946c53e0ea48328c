package ops_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/rs/zerolog"
)

func TestReadyzFollowsItsChecksAndMetricsAreServed(t *testing.T) {
	t.Parallel()
	var consuming atomic.Bool
	h := ops.Handler(ops.NewRegistry(), map[string]ops.Check{
		"consumer": func(context.Context) error {
			if !consuming.Load() {
				return errors.New("not consuming")
			}
			return nil
		},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "consumer: not consuming") {
		t.Fatalf("/readyz while not consuming = %d %q", code, body)
	}
	consuming.Store(true)
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("/readyz while consuming = %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics = %d", code)
	}
}

// Every waits one interval before the first call, calls f again each
// interval and returns when ctx is cancelled.
func TestEveryCallsAfterEachIntervalUntilCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan time.Time, 10)
	start := time.Now()
	done := make(chan struct{})
	go func() {
		ops.Every(ctx, 50*time.Millisecond, func(context.Context) {
			calls <- time.Now()
			if len(calls) == 3 {
				cancel()
			}
		})
		close(done)
	}()
	<-done
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3 before the cancel", len(calls))
	}
	if first := <-calls; first.Sub(start) < 50*time.Millisecond {
		t.Errorf("first call after %v, want one interval (50ms) first", first.Sub(start))
	}
}

// ServeHTTP serves until ctx is cancelled, then waits up to the grace for a
// request in flight and closes a connection that outlasts it (an event
// stream), returning nil; the port is free afterwards.
func TestServeHTTPShutsDownWithinTheGrace(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	streaming := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(streaming)
		<-r.Context().Done() // until the client or the server closes it
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ops.ServeHTTP(ctx, addr, &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}, 200*time.Millisecond, zerolog.Nop())
	}()
	var resp *http.Response
	if !testenv.Poll(time.Now().Add(testenv.Within(t, 2*time.Second)), func() bool {
		resp, err = http.Get("http://" + addr + "/stream")
		return err == nil
	}) {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-streaming
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeHTTP after the cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeHTTP still serving 10 s after the cancel with a 200 ms grace")
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the stream still open after ServeHTTP returned")
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port still taken after ServeHTTP returned: %v", err)
	}
	ln.Close()
}
