package step_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/broker/brokertest"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
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

// Raw+postgres and the runtime, the pair the goal compares, run in
// relayRounds alternated rounds (raw+postgres first in odd rounds, the
// runtime first in even ones) of at least relayRoundHops hops each: on a
// shared machine either may catch a slow second, and what ran just before
// (Postgres checkpoints, RabbitMQ compacting its log, the heap the last
// run left) weighs on the next. The ratio printed is the median of the
// rounds' ratios.
const (
	relayRounds    = 3
	relayRoundHops = 3000
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
	var raw, rawPGAsync, rtAlone float64
	b.Run("raw", func(b *testing.B) {
		raw = rawRelay(b, b.N, nil)
	})
	// The raw relay with the first write committed as the runtime commits
	// its claim (synchronous_commit off): the strictest baseline.
	b.Run("raw+postgres-async-claim", func(b *testing.B) {
		db := hopsTable(b)
		rawPGAsync = rawRelay(b, b.N, func(ctx context.Context, body []byte) error {
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
		rtAlone = runtimeRelay(b, b.N, step.Uncombined)
	})
	var pg, rt, ratios []float64
	for round := 1; round <= relayRounds; round++ {
		var p, r float64
		runPG := func() {
			b.Run(fmt.Sprintf("raw+postgres/round%d", round), func(b *testing.B) {
				p = rawPostgresRelay(b, max(b.N, relayRoundHops))
			})
		}
		runRT := func() {
			b.Run(fmt.Sprintf("runtime/round%d", round), func(b *testing.B) {
				r = runtimeRelay(b, max(b.N, relayRoundHops), nil)
			})
		}
		if round%2 == 1 {
			runPG()
			runRT()
		} else {
			runRT()
			runPG()
		}
		if p == 0 || r == 0 {
			return // filtered out, or failed
		}
		pg, rt, ratios = append(pg, p), append(rt, r), append(ratios, r/p)
	}
	ratio, rtMid, pgMid := median(ratios), median(rt), median(pg)
	line := fmt.Sprintf("relay (%d in flight): alternated rounds raw+postgres %s hops/s, runtime %s: runtime/raw+postgres = %.2f (median of %s)",
		benchConcurrency, figures(pg, "%.0f"), figures(rt, "%.0f"), ratio, figures(ratios, "%.2f"))
	// The others, when the filter let them run.
	if rtAlone > 0 {
		line += fmt.Sprintf("; runtime-uncombined %.0f hops/s = %.2f", rtAlone, rtAlone/pgMid)
	}
	if rawPGAsync > 0 {
		line += fmt.Sprintf("; raw+postgres-async-claim %.0f hops/s: runtime/it = %.2f", rawPGAsync, rtMid/rawPGAsync)
	}
	if raw > 0 {
		line += fmt.Sprintf("; raw %.0f hops/s: runtime/raw = %.2f", raw, rtMid/raw)
	}
	fmt.Println(line)
}

// rawPostgresRelay is the raw relay with the two Postgres writes of a step
// in each hop: the baseline the runtime is held to.
func rawPostgresRelay(b *testing.B, hops int) float64 {
	db := hopsTable(b)
	return rawRelay(b, hops, func(ctx context.Context, body []byte) error {
		id := uuid.New()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO hops (id, status, at) VALUES ($1, 'running', now())`, id); err != nil {
			return err
		}
		_, err := db.Pool.Exec(ctx, `UPDATE hops SET status = 'succeeded', at = now() WHERE id = $1`, id)
		return err
	})
}

// hopsTable is a fresh database with the raw relay's table.
func hopsTable(b *testing.B) *testenv.Database {
	db := testenv.Postgres(b)
	if _, err := db.Pool.Exec(context.Background(), `CREATE TABLE hops (id uuid PRIMARY KEY, status text, at timestamptz)`); err != nil {
		b.Fatal(err)
	}
	return db
}

// median is the middle of xs (the mean of the two middle ones for an even
// count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// figures formats xs with format, separated by slashes.
func figures(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, "/")
}

// rawRelay relays hops hops with plain amqp091-go, work in each, and
// reports hops/s (and the time per hop as ns/op).
func rawRelay(b *testing.B, hops int, work func(context.Context, []byte) error) float64 {
	url := testenv.AMQP(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var mem runtime.MemStats
	elapsed, err := brokertest.RawRelay(ctx, url, hops, brokertest.RelayOptions{
		Prefetch: benchPrefetch, Concurrency: benchConcurrency, Started: func() { b.ResetTimer(); mem = memNow() }, Work: work,
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	return reportHops(b, hops, elapsed, mem)
}

// reportHops reports the rate of hops done in elapsed, and per hop the
// time as ns/op and what was allocated since mem as B/op and allocs/op (a
// round's hops may be more than b.N).
func reportHops(b *testing.B, hops int, elapsed time.Duration, mem runtime.MemStats) float64 {
	rate := float64(hops) / elapsed.Seconds()
	now := memNow()
	b.ReportMetric(rate, "hops/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(hops), "ns/op")
	b.ReportMetric(float64(now.TotalAlloc-mem.TotalAlloc)/float64(hops), "B/op")
	b.ReportMetric(float64(now.Mallocs-mem.Mallocs)/float64(hops), "allocs/op")
	return rate
}

func memNow() runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// runtimeRelay relays hops hops through a step runner with a no-op
// handler, tweak applied to it, and reports hops/s (and the time per hop as
// ns/op).
func runtimeRelay(b *testing.B, hops int, tweak func(*step.Runner)) float64 {
	h := setup(b)
	var relayed atomic.Int64
	done := make(chan time.Time, 1)
	target := int64(hops)
	// A no-op step that hands over to the next hop: a fresh task's message
	// through the outbox, as a real step's next message goes. The messages
	// are built before the clock starts, as the raw relay's is: what is
	// measured is the runtime's work, not the handler's.
	bodies := make([][]byte, hops+benchPrefetch)
	for i := range bodies {
		body, err := asrEnvelope(b).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = body
	}
	relay := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		n := relayed.Add(1)
		msg.Publish(wire.Exchange, wire.QueueASR, bodies[(n-1)%int64(len(bodies))])
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
		Queue:     wire.QueueASR,
		Routes:    route(relay),
		Pool:      h.db.Pool,
		Source:    step.BrokerSource(conn, broker.ConsumeOptions{Queue: wire.QueueASR, Prefetch: benchPrefetch, Concurrency: benchConcurrency}),
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
	mem := memNow()
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
	return reportHops(b, hops, end.Sub(start), mem)
}
