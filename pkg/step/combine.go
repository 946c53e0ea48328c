package step

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// combiner sends the Postgres round trips of concurrent deliveries
// together. A delivery hands it the statements of one round trip (its
// claim, or its commit); when fewer than maxFlight batches are in flight
// they go at once, alone, as before; else they wait and go with the others
// that arrived meanwhile, in one batch — one round trip, one transaction
// and one WAL flush for up to maxItems deliveries. A quiet runner pays
// nothing for it; a busy one spends a fraction of the round trips and
// connections per delivery.
//
// A batch runs in one transaction, so it commits all of its deliveries'
// statements or none. When it fails with an error Postgres raised (a lost
// lease, a refused transition, a deadlock between two batches), Postgres
// rolled it back, and each delivery's round trip is sent again alone, so
// that one delivery's failure is its own: every delivery gets exactly the
// outcome it would have had alone. When it fails because Postgres is
// unreachable (store.Unreachable), its context ended or the client failed
// reading a result, whether it committed is unknown, as for a round trip
// alone: every delivery gets that error and the decisions treat it as they always did.
type combiner struct {
	pool      *pgxpool.Pool
	maxItems  int
	maxFlight int

	mu      sync.Mutex
	waiting []*roundTrip
	flight  int

	// merged counts the batches that carried more than one delivery.
	merged atomic.Int64
}

// roundTrip is one delivery's statements on their way through a combiner.
type roundTrip struct {
	ctx context.Context
	// key orders the round trips of a batch (the task, the part): batches
	// in flight at once then take their locks in one order and do not
	// deadlock over them.
	key string
	// queue queues the statements on b, with callbacks that write the
	// results where the delivery reads them; it is called again, on a
	// fresh batch, when the round trip is sent again alone.
	queue func(b *pgx.Batch)
	err   error
	done  chan struct{}
}

// A runner's combiners send up to combineFlight batches at once, each of up
// to combineItems deliveries: two batches in flight keep one round trip's
// wait from stalling the next, and leave the pool's other connections to
// the handlers, heartbeats and outbox.
const (
	combineItems  = 64
	combineFlight = 2
)

// newCombiner returns a combiner on pool: up to maxFlight batches at once,
// each of up to maxItems deliveries.
func newCombiner(pool *pgxpool.Pool, maxItems, maxFlight int) *combiner {
	return &combiner{pool: pool, maxItems: max(maxItems, 1), maxFlight: max(maxFlight, 1)}
}

// do sends the statements queue queues, in a batch's order by key, with others' if it has to wait
// for a batch in flight, and returns when they ran, with their error (the
// batch's Close: a callback's or a statement's).
func (c *combiner) do(ctx context.Context, key string, queue func(b *pgx.Batch)) error {
	rt := &roundTrip{ctx: ctx, key: key, queue: queue, done: make(chan struct{})}
	c.mu.Lock()
	c.waiting = append(c.waiting, rt)
	lead := c.flight < c.maxFlight
	if lead {
		c.flight++
	}
	c.mu.Unlock()
	if lead {
		// Nothing waits while a batch may start: rt is first in line.
		c.send()
	}
	<-rt.done
	return rt.err
}

// send sends the next batch of the waiting round trips, then lets another
// goroutine go on with those that came meanwhile; with none waiting it
// gives its place in flight back.
func (c *combiner) send() {
	c.mu.Lock()
	n := min(len(c.waiting), c.maxItems)
	if n == 0 {
		c.flight--
		c.mu.Unlock()
		return
	}
	group := make([]*roundTrip, n)
	copy(group, c.waiting)
	c.waiting = append(c.waiting[:0], c.waiting[n:]...)
	c.mu.Unlock()
	c.run(group)
	go c.send()
}

// run sends group as one batch and settles each of its round trips.
func (c *combiner) run(group []*roundTrip) {
	if len(group) == 1 {
		group[0].err = c.alone(group[0])
		close(group[0].done)
		return
	}
	c.merged.Add(1)
	// The deliveries of one runner share its work context.
	ctx := group[0].ctx
	slices.SortStableFunc(group, func(x, y *roundTrip) int { return strings.Compare(x.key, y.key) })
	b := &pgx.Batch{}
	for _, rt := range group {
		rt.queue(b)
	}
	err := c.pool.SendBatch(ctx, b).Close()
	if rolledBack(ctx, err) {
		// Each goes again alone, and fails alone.
		var wg sync.WaitGroup
		for _, rt := range group {
			wg.Go(func() {
				rt.err = c.alone(rt)
				close(rt.done)
			})
		}
		wg.Wait()
		return
	}
	for _, rt := range group {
		rt.err = err
		close(rt.done)
	}
}

// rolledBack reports whether err, a batch's, is a statement's error raised
// by Postgres, which then rolled the batch's transaction back; not an
// outage, nor the end of ctx, nor an error of the client's own.
func rolledBack(ctx context.Context, err error) bool {
	var pg *pgconn.PgError
	return err != nil && errors.As(err, &pg) && !store.Unreachable(err) && ctx.Err() == nil
}

// alone sends rt's statements in a batch of their own.
func (c *combiner) alone(rt *roundTrip) error {
	b := &pgx.Batch{}
	rt.queue(b)
	return c.pool.SendBatch(rt.ctx, b).Close()
}
