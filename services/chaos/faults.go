package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// backends are the proxied services; the faults on their connections
// name them.
var backends = []string{"rabbitmq", "postgres", "minio"}

// injector injects faults: the services' processes are killed, the
// backing services restarted or crashed, their connections cut, stalled
// and slowed.
type injector struct {
	rabbit *rabbit
	pg     *postgres
	minio  *minioServer
	px     *proxies
	procs  *procs
	kills  map[string]chan time.Duration
	logf   func(string, ...any)
	// ha, when set, is the -ha stack: its faults replace the others.
	ha *haStack

	mu     sync.Mutex
	counts map[string]int
	// events are the faults injected, in order, with when each began.
	events []faultEvent
}

// faultEvent is one fault injected: its kind and when it began.
type faultEvent struct {
	Kind string
	At   time.Time
}

// began records that a fault of kind begins now.
func (in *injector) began(kind string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.events = append(in.events, faultEvent{Kind: kind, At: time.Now()})
}

// faultLog returns the faults injected so far.
func (in *injector) faultLog() []faultEvent {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]faultEvent(nil), in.events...)
}

// faultAt logs what a fault of kind acts on.
func (in *injector) faultAt(kind, what string) {
	in.logf("fault: %s: %s", kind, what)
}

func (in *injector) count(kind string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.counts[kind]++
}

func (in *injector) snapshot() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]int, len(in.counts))
	for k, v := range in.counts {
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
func (in *injector) faults() []fault {
	if in.ha != nil {
		return in.haFaults()
	}
	fs := []fault{
		{"rabbitmq_restart", func(ctx context.Context, rng *rand.Rand) error { return in.restartNode(rng, false) }},
		{"rabbitmq_kill", func(ctx context.Context, rng *rand.Rand) error { return in.restartNode(rng, true) }},
		{"postgres_crash", func(ctx context.Context, rng *rand.Rand) error {
			return in.pg.crash(ctx, uniform(rng, time.Second, 5*time.Second))
		}},
		{"minio_restart", func(ctx context.Context, rng *rand.Rand) error {
			return in.minio.restart(ctx, false, uniform(rng, time.Second, 5*time.Second))
		}},
		{"minio_kill", func(ctx context.Context, rng *rand.Rand) error {
			return in.minio.restart(ctx, true, uniform(rng, time.Second, 5*time.Second))
		}},
	}
	if len(in.rabbit.nodes) > 1 {
		fs = append(fs, fault{"rabbitmq_partition", in.partition})
	}
	for _, b := range backends {
		fs = append(fs,
			fault{"cut_" + b, func(ctx context.Context, rng *rand.Rand) error {
				in.px.cut(b)
				sleepCtx(ctx, uniform(rng, 2*time.Second, 10*time.Second))
				return in.px.restore(b)
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
func (in *injector) toxic(ctx context.Context, b, spec string, d time.Duration) error {
	undo, err := in.px.addToxic(b, spec)
	if err != nil {
		return err
	}
	sleepCtx(ctx, d)
	return undo()
}

// restartNode stops (kills, when crash is set) a RabbitMQ node drawn at
// random and starts it again; on a cluster the others serve meanwhile and
// it rejoins them.
func (in *injector) restartNode(rng *rand.Rand, crash bool) error {
	i := rng.IntN(len(in.rabbit.nodes))
	if len(in.rabbit.nodes) > 1 {
		in.logf("fault: node %d (%s)", i+1, in.rabbit.addr(i))
	}
	return in.rabbit.restart(i, crash)
}

// partitionFor is how long a partitioned node stays out of the services'
// reach.
const partitionFor = 30 * time.Second

// partition takes a cluster node drawn at random away from the services
// for partitionFor: its proxy drops everything both ways and leaves the
// connections open, as a network partition does; new connections hang
// until the client gives up. The services fail over to the other nodes.
func (in *injector) partition(ctx context.Context, rng *rand.Rand) error {
	i := rng.IntN(len(in.rabbit.nodes))
	name := rabbitProxy(i)
	in.logf("fault: node %d (%s) partitioned away for %s", i+1, in.rabbit.addr(i), partitionFor)
	var undo []func() error
	for _, stream := range []string{"downstream", "upstream"} {
		u, err := in.px.addToxic(name, `{"type":"timeout","stream":"`+stream+`","attributes":{"timeout":0}}`)
		if err != nil {
			for _, f := range undo {
				_ = f()
			}
			return err
		}
		undo = append(undo, u)
	}
	sleepCtx(ctx, partitionFor)
	var errs []error
	for _, f := range undo {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// rabbitProxy names the proxy of RabbitMQ node i.
func rabbitProxy(i int) string { return fmt.Sprintf("rabbitmq-%d", i+1) }

// runFaults injects faults one after another, with pauses of 3 to 15 s,
// until ctx ends: first every kind once in a random order, then kinds
// drawn at random. Each fault is undone before the next starts and before
// runFaults returns.
func (in *injector) runFaults(ctx context.Context, rng *rand.Rand) {
	all := in.faults()
	order := rng.Perm(len(all))
	for i := 0; ctx.Err() == nil; i++ {
		sleepCtx(ctx, uniform(rng, 3*time.Second, 15*time.Second))
		if ctx.Err() != nil {
			return
		}
		f := all[rng.IntN(len(all))]
		if i < len(order) {
			f = all[order[i]]
		}
		in.logf("fault: %s", f.name)
		in.began(f.name)
		// A fault cut short by the end of ctx is undone all the same.
		if err := f.do(ctx, rng); err != nil {
			in.logf("fault %s: %v", f.name, err)
			in.count(f.name + "_error")
			continue
		}
		in.count(f.name)
	}
}

// runKills SIGKILLs a random service every 2 to 10 s until ctx ends; its
// supervisor starts it again after 0.5 to 4 s.
func (in *injector) runKills(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		sleepCtx(ctx, uniform(rng, 2*time.Second, 10*time.Second))
		if ctx.Err() != nil {
			return
		}
		name := services[rng.IntN(len(services))]
		down := uniform(rng, 500*time.Millisecond, 4*time.Second)
		select {
		case in.kills[name] <- down:
			in.logf("fault: SIGKILL %s (down %s)", name, down.Round(time.Millisecond))
			in.count("kill_" + name)
		default:
			// Its supervisor is still restarting it from the last kill.
		}
	}
}
