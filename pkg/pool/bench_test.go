package pool_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// BenchmarkSelection measures what the pool adds to a call: reserving an
// engine and releasing it (two round trips to Postgres), with 2 replicas
// × 8 consumers calling at once on one pool of three engines with quotas
// and concurrency limits that never bind. ns/op is per call.
func BenchmarkSelection(b *testing.B) {
	db := testenv.Postgres(b)
	clk := &clock{}
	var members []pool.Member
	for _, name := range []string{"a", "b", "c"} {
		members = append(members, pool.Member{Name: name, Kind: "apy", BaseURL: "http://unused", DailyQuota: 1 << 40, Concurrency: 64})
	}
	replicas := []*pool.Pool{}
	for range 2 {
		p, _ := replica(b, db.Pool, clk, members...)
		replicas = append(replicas, p)
	}
	var n, spent, calls atomic.Int64
	noop := func(context.Context, string) error { return nil }
	b.SetParallelism(max(16/testingProcs(), 1)) // 16 consumers: 2 replicas × 8
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		p := replicas[n.Add(1)%2]
		for pb.Next() {
			start := time.Now()
			err := p.Do(context.Background(), 1, noop)
			spent.Add(int64(time.Since(start)))
			calls.Add(1)
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(spent.Load())/float64(max(calls.Load(), 1))/1e6, "ms/call")
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }
