package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dubflow/dubflow/services/chaos/internal/procs"
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
)

// Backends are the proxied services; the faults on their connections
// name them.
var Backends = []string{"rabbitmq", "postgres", "minio"}

// Injector injects faults: the services' processes are killed, the
// backing services restarted or crashed, their connections cut, stalled
// and slowed.
type Injector struct {
	Rabbit *stack.Rabbit
	Pg     *stack.Postgres
	Minio  *stack.MinioServer
	Px     *stack.Proxies
	Procs  *procs.Procs
	Kills  map[string]chan time.Duration
	Logf   func(string, ...any)
	// Ha, when set, is the -ha stack: its faults replace the others.
	Ha *stack.HAStack

	mu     sync.Mutex
	Counts map[string]int
	// events are the faults injected, in order, with when each began.
	events []FaultEvent
}

// FaultEvent is one fault injected: its kind and when it began.
type FaultEvent struct {
	Kind string
	At   time.Time
}

// began records that a fault of kind begins now.
func (in *Injector) began(kind string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.events = append(in.events, FaultEvent{Kind: kind, At: time.Now()})
}

// FaultLog returns the faults injected so far.
func (in *Injector) FaultLog() []FaultEvent {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]FaultEvent(nil), in.events...)
}

// faultAt logs what a fault of kind acts on.
func (in *Injector) faultAt(kind, what string) {
	in.Logf("fault: %s: %s", kind, what)
}

func (in *Injector) count(kind string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.Counts[kind]++
}

func (in *Injector) Snapshot() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]int, len(in.Counts))
	for k, v := range in.Counts {
		out[k] = v
	}
	return out
}

// fault is one kind of fault; do injects it and undoes it before
// returning.
type fault struct {
	name string
	do   func(ctx context.Context, rng *rand.Rand) error
}

// uniform returns a duration in [lo, hi).
func uniform(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// faults lists every kind: restarts and crashes of the three backing
// services, and for each of their connections a cut (every connection
// reset, new ones refused), a stall (data held, connections open) and a
// slowdown (latency with jitter); on the -ha stack, its own (haFaults).
func (in *Injector) faults() []fault {
	if in.Ha != nil {
		return in.haFaults()
	}
	fs := []fault{
		{"rabbitmq_restart", func(ctx context.Context, rng *rand.Rand) error { return in.restartNode(rng, false) }},
		{"rabbitmq_kill", func(ctx context.Context, rng *rand.Rand) error { return in.restartNode(rng, true) }},
		{"postgres_crash", func(ctx context.Context, rng *rand.Rand) error {
			return in.Pg.Crash(ctx, uniform(rng, time.Second, 5*time.Second))
		}},
		{"minio_restart", func(ctx context.Context, rng *rand.Rand) error {
			return in.Minio.Restart(ctx, false, uniform(rng, time.Second, 5*time.Second))
		}},
		{"minio_kill", func(ctx context.Context, rng *rand.Rand) error {
			return in.Minio.Restart(ctx, true, uniform(rng, time.Second, 5*time.Second))
		}},
	}
	if len(in.Rabbit.Nodes) > 1 {
		fs = append(fs, fault{"rabbitmq_partition", in.partition})
	}
	for _, b := range Backends {
		fs = append(fs,
			fault{"cut_" + b, func(ctx context.Context, rng *rand.Rand) error {
				in.Px.Cut(b)
				stack.SleepCtx(ctx, uniform(rng, 2*time.Second, 10*time.Second))
				return in.Px.Restore(b)
			}},
			fault{"stall_" + b, func(ctx context.Context, rng *rand.Rand) error {
				return in.toxic(ctx, b, `{"type":"timeout","stream":"downstream","attributes":{"timeout":0}}`,
					uniform(rng, 3*time.Second, 15*time.Second))
			}},
			fault{"slow_" + b, func(ctx context.Context, rng *rand.Rand) error {
				lat := 100 + rng.IntN(1400)
				return in.toxic(ctx, b, fmt.Sprintf(`{"type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":%d}}`, lat, lat/2),
					uniform(rng, 5*time.Second, 20*time.Second))
			}},
		)
	}
	return fs
}

// toxic holds a toxic on b's proxies for d.
func (in *Injector) toxic(ctx context.Context, b, spec string, d time.Duration) error {
	undo, err := in.Px.AddToxic(b, spec)
	if err != nil {
		return err
	}
	stack.SleepCtx(ctx, d)
	return undo()
}

// restartNode stops (kills, when crash is set) a RabbitMQ node drawn at
// random and starts it again; on a cluster the others serve meanwhile and
// it rejoins them.
func (in *Injector) restartNode(rng *rand.Rand, crash bool) error {
	i := rng.IntN(len(in.Rabbit.Nodes))
	if len(in.Rabbit.Nodes) > 1 {
		in.Logf("fault: node %d (%s)", i+1, in.Rabbit.Addr(i))
	}
	return in.Rabbit.Restart(i, crash)
}

// partitionFor is how long a partitioned node stays out of the services'
// reach.
const partitionFor = 30 * time.Second

// partition takes a cluster node drawn at random away from the services
// for partitionFor: its proxy drops everything both ways and leaves the
// connections open, as a network partition does; new connections hang
// until the client gives up. The services fail over to the other nodes.
func (in *Injector) partition(ctx context.Context, rng *rand.Rand) error {
	i := rng.IntN(len(in.Rabbit.Nodes))
	name := RabbitProxy(i)
	in.Logf("fault: node %d (%s) partitioned away for %s", i+1, in.Rabbit.Addr(i), partitionFor)
	var undo []func() error
	for _, stream := range []string{"downstream", "upstream"} {
		u, err := in.Px.AddToxic(name, `{"type":"timeout","stream":"`+stream+`","attributes":{"timeout":0}}`)
		if err != nil {
			for _, f := range undo {
				_ = f()
			}
			return err
		}
		undo = append(undo, u)
	}
	stack.SleepCtx(ctx, partitionFor)
	var errs []error
	for _, f := range undo {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// RabbitProxy names the proxy of RabbitMQ node i.
func RabbitProxy(i int) string { return fmt.Sprintf("rabbitmq-%d", i+1) }

// RunFaults injects faults one after another, with pauses of 3 to 15 s,
// until ctx ends: first every kind once in a random order, then kinds
// drawn at random. Each fault is undone before the next starts and before
// runFaults returns.
func (in *Injector) RunFaults(ctx context.Context, rng *rand.Rand) {
	all := in.faults()
	order := rng.Perm(len(all))
	for i := 0; ctx.Err() == nil; i++ {
		stack.SleepCtx(ctx, uniform(rng, 3*time.Second, 15*time.Second))
		if ctx.Err() != nil {
			return
		}
		f := all[rng.IntN(len(all))]
		if i < len(order) {
			f = all[order[i]]
		}
		in.Logf("fault: %s", f.name)
		in.began(f.name)
		// A fault cut short by the end of ctx is undone all the same.
		if err := f.do(ctx, rng); err != nil {
			in.Logf("fault %s: %v", f.name, err)
			in.count(f.name + "_error")
			continue
		}
		in.count(f.name)
	}
}

// RunKills SIGKILLs a random service every 2 to 10 s until ctx ends; its
// supervisor starts it again after 0.5 to 4 s.
func (in *Injector) RunKills(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		stack.SleepCtx(ctx, uniform(rng, 2*time.Second, 10*time.Second))
		if ctx.Err() != nil {
			return
		}
		name := procs.Services[rng.IntN(len(procs.Services))]
		down := uniform(rng, 500*time.Millisecond, 4*time.Second)
		select {
		case in.Kills[name] <- down:
			in.Logf("fault: SIGKILL %s (down %s)", name, down.Round(time.Millisecond))
			in.count("kill_" + name)
		default:
			// Its supervisor is still restarting it from the last kill.
		}
	}
}
