package ops_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dubflow/dubflow/pkg/ops"
)

func TestReadyzFollowsItsChecksAndMetricsAreServed(t *testing.T) {
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
