package step_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The relay shape is the same for every relay and sized to the cores as a
// worker of I/O-bound steps should be: 16 deliveries in flight per core
// (GOMAXPROCS), each handled at once (prefetch = concurrency). A hop waits
// on Postgres and the broker far longer than it computes, so throughput
// grows with what is in flight until Postgres or the broker is busy.
var (
	benchConcurrency = 16 * runtime.GOMAXPROCS(0)
	benchPrefetch    = benchConcurrency
)

// BenchmarkRelay compares, in one run on one broker and one Postgres, a hop
// of raw amqp091-go relaying (consume, publish with confirm, ack), the same
// plus the two Postgres writes a step needs (claim, then finish), and the
// step runtime with a no-op handler (decode and validate, claim, commit of
// the success with the next message in the outbox, publish with confirm,
// ack, outbox cleanup), with its claims and commits combined across
// deliveries (as it runs) and each alone (as it ran before). It prints
// hops/s and the ratios.
func BenchmarkRelay(b *testing.B) {
	var raw, rawPG, rawPGAsync, rt, rtAlone float64
	b.Run("raw", func(b *testing.B) {
		raw = rawRelay(b, nil)
	})
	b.Run("raw+postgres", func(b *testing.B) {
		db := testenv.Postgres(b)
		if _, err := db.Pool.Exec(context.Background(), `CREATE TABLE hops (id uuid PRIMARY KEY, status text, at timestamptz)`); err != nil {
			b.Fatal(err)
		}
		rawPG = rawRelay(b, func(ctx context.Context, body []byte) error {
			id := uuid.New()
			if _, err := db.Pool.Exec(ctx, `INSERT INTO hops (id, status, at) VALUES ($1, 'running', now())`, id); err != nil {
				return err
			}
			_, err := db.Pool.Exec(ctx, `UPDATE hops SET status = 'succeeded', at = now() WHERE id = $1`, id)
			return err
		})
	})
	// The same, with the first write committed as the runtime commits its
	// claim (synchronous_commit off): the strictest baseline.
	b.Run("raw+postgres-async-claim", func(b *testing.B) {
		db := testenv.Postgres(b)
		if _, err := db.Pool.Exec(context.Background(), `CREATE TABLE hops (id uuid PRIMARY KEY, status text, at timestamptz)`); err != nil {
			b.Fatal(err)
		}
		rawPGAsync = rawRelay(b, func(ctx context.Context, body []byte) error {
			id := uuid.New()
			batch := &pgx.Batch{}
			batch.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
			batch.Queue(`INSERT INTO hops (id, status, at) VALUES ($1, 'running', now())`, id)
			if err := db.Pool.SendBatch(ctx, batch).Close(); err != nil {
				return err
			}
			_, err := db.Pool.Exec(ctx, `UPDATE hops SET status = 'succeeded', at = now() WHERE id = $1`, id)
			return err
		})
	})
	// The runtime as it was before its claims and commits were combined
	// (each delivery's in a round trip of its own): the figure before.
	b.Run("runtime-uncombined", func(b *testing.B) {
		rtAlone = runtimeRelay(b, step.Uncombined)
	})
	b.Run("runtime", func(b *testing.B) {
		rt = runtimeRelay(b, nil)
	})
	if raw > 0 && rawPG > 0 && rawPGAsync > 0 && rt > 0 && rtAlone > 0 {
		fmt.Printf("relay (%d in flight) hops/s: raw %.0f, raw+postgres %.0f, raw+postgres-async-claim %.0f, runtime-uncombined %.0f, runtime %.0f; "+
			"runtime/raw+postgres = %.2f (uncombined %.2f), runtime/raw+postgres-async-claim = %.2f (uncombined %.2f), runtime/raw = %.2f\n",
			benchConcurrency, raw, rawPG, rawPGAsync, rtAlone, rt, rt/rawPG, rtAlone/rawPG, rt/rawPGAsync, rtAlone/rawPGAsync, rt/raw)
	}
}

func rawRelay(b *testing.B, work func(context.Context, []byte) error) float64 {
	url := testenv.AMQP(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	elapsed, err := brokertest.RawRelay(ctx, url, b.N, brokertest.RelayOptions{
		Prefetch: benchPrefetch, Concurrency: benchConcurrency, Started: b.ResetTimer, Work: work,
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "hops/s")
	return rate
}

func runtimeRelay(b *testing.B, tweak func(*step.Runner)) float64 {
	h := setup(b)
	var hops atomic.Int64
	done := make(chan time.Time, 1)
	target := int64(b.N)
	// A no-op step that hands over to the next hop: a fresh task's message
	// through the outbox, as a real step's next message goes. The messages
	// are built before the clock starts, as the raw relay's is: what is
	// measured is the runtime's work, not the handler's.
	bodies := make([][]byte, b.N+benchPrefetch)
	for i := range bodies {
		body, err := asrEnvelope(b).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = body
	}
	relay := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		n := hops.Add(1)
		msg.Publish(wire.Exchange, broker.QueueASR, bodies[(n-1)%int64(len(bodies))])
		if n == target {
			done <- time.Now()
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := broker.Dial(ctx, h.url, "bench-consume", h.log)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	r, err := step.NewRunner(step.Config{
		Queue:     broker.QueueASR,
		Routes:    route(relay),
		Pool:      h.db.Pool,
		Source:    worker.Source(conn, broker.ConsumeOptions{Queue: broker.QueueASR, Prefetch: benchPrefetch, Concurrency: benchConcurrency}),
		Publisher: h.pub,
		Delay:     broker.Topology{}.DelayExchange,
		Log:       h.log,
	})
	if err != nil {
		b.Fatal(err)
	}
	if tweak != nil {
		tweak(r)
	}
	for range benchPrefetch {
		h.publish(asrEnvelope(b))
	}
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { stopped <- r.Run(runCtx) }()
	var end time.Time
	select {
	case end = <-done:
	case <-time.After(10 * time.Minute):
		b.Fatal("runtime relay did not finish")
	}
	b.StopTimer()
	stop()
	if err := <-stopped; err != nil {
		b.Fatal(err)
	}
	rate := float64(b.N) / end.Sub(start).Seconds()
	b.ReportMetric(rate, "hops/s")
	return rate
}
