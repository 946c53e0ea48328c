package speech

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
)

// TestRequestsCarryTheTrace: an engine request made for a message sends
// the message's trace id (wire.WithTrace, set by the step runtime's Tracing
// middleware) as X-Request-Id; one made without a trace sends none.
func TestRequestsCarryTheTrace(t *testing.T) {
	t.Parallel()
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Request-Id")
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	for _, c := range []struct {
		ctx  context.Context
		want string
	}{{wire.WithTrace(context.Background(), "trace-42"), "trace-42"}, {context.Background(), ""}} {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := do(c.ctx, srv.Client(), req, "probe"); err != nil {
			t.Fatal(err)
		}
		if id := <-got; id != c.want {
			t.Errorf("X-Request-Id %q, want %q", id, c.want)
		}
	}
}
