package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/rs/zerolog"
)

// Dial connects a broker.Conn named name to url, with a confirming
// publisher on it; both are closed when the test ends.
func Dial(tb testing.TB, url, name string) (*broker.Conn, *broker.Publisher) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := broker.Dial(ctx, url, name, zerolog.Nop())
	if err != nil {
		tb.Fatalf("dial %s: %v", name, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	pub := broker.NewPublisher(conn)
	tb.Cleanup(func() { _ = pub.Close() })
	return conn, pub
}
