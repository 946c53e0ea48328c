package pool_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkSelection measures what the pool adds to a call: reserving an
// engine and releasing it, with 2 replicas × 8 consumers calling at once
// on one pool of three engines whose quotas and concurrency never bind.
// Beside it, in the same run, the baseline: the same consumers making two
// bare round trips to Postgres per call (SELECT 1 twice, the least a
// reservation and its release can cost). ms/call is the time a call spends
// in it (waiting for the database included), ns/op the throughput.
//
// noop calls do nothing, so the 16 consumers saturate the database (on a
// small machine ms/call is then mostly queueing behind each other);
// engine-20ms and engine-200ms calls take that long, as a (fast) remote
// engine would, and ms/call is what the selection adds to them.
func BenchmarkSelection(b *testing.B) {
	db := testenv.Postgres(b)
	var members []pool.Member
	for _, name := range []string{"a", "b", "c"} {
		members = append(members, pool.Member{Name: name, Kind: "apy", BaseURL: "http://unused", Limits: pool.Limits{DailyQuota: 1 << 40, Concurrency: 64}})
	}
	// Each replica has its own connections, as two processes would.
	var replicas []*pool.Pool
	var conns []*pgxpool.Pool
	for range 2 {
		c, err := store.Open(context.Background(), db.URL)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		conns = append(conns, c)
		replicas = append(replicas, stepPool(b, c, &clock{}, "translate", members...))
	}
	for _, call := range []time.Duration{0, 20 * time.Millisecond, 200 * time.Millisecond} {
		name := "noop"
		if call > 0 {
			name = fmt.Sprintf("engine-%s", call)
		}
		b.Run(name+"/baseline", func(b *testing.B) {
			consumers(b, call, func(i int) error {
				if err := roundTrips(conns[i%2]); err != nil {
					return err
				}
				return engineCall(call)
			})
		})
		b.Run(name+"/selection", func(b *testing.B) {
			consumers(b, call, func(i int) error {
				return replicas[i%2].Do(context.Background(), 1, func(context.Context, string) error { return engineCall(call) })
			})
		})
	}
}

// consumers runs do on 16 goroutines (consumer i on replica i%2) and
// reports the time per call beyond the engine's own call time: its mean
// (ms/call) and what a consumer waited at the median, the 95th and the
// 99th percentile (p50-ms, p95-ms, p99-ms).
func consumers(b *testing.B, call time.Duration, do func(consumer int) error) {
	var n atomic.Int64
	var mu sync.Mutex
	var spent []time.Duration
	b.SetParallelism(max(16/runtime.GOMAXPROCS(0), 1))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(n.Add(1))
		var mine []time.Duration
		defer func() { mu.Lock(); spent = append(spent, mine...); mu.Unlock() }()
		for pb.Next() {
			start := time.Now()
			err := do(i)
			mine = append(mine, time.Since(start)-call)
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	slices.Sort(spent)
	var sum time.Duration
	for _, d := range spent {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(sum)/float64(max(len(spent), 1)), "ms/call")
	if len(spent) > 0 {
		b.ReportMetric(ms(spent[len(spent)/2]), "p50-ms")
		b.ReportMetric(ms(spent[len(spent)*95/100]), "p95-ms")
		b.ReportMetric(ms(spent[len(spent)*99/100]), "p99-ms")
	}
}

// roundTrips is the baseline's call: two round trips, then the engine.
func roundTrips(db *pgxpool.Pool) error {
	var one int
	for range 2 {
		if err := db.QueryRow(context.Background(), `SELECT 1`).Scan(&one); err != nil {
			return err
		}
	}
	return nil
}

// engineCall stands for the engine's own work.
func engineCall(d time.Duration) error {
	if d > 0 {
		time.Sleep(d)
	}
	return nil
}
