package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/jackc/pgx/v5/pgconn"
)

// A standby refuses writes (25006): after a failover that is the old
// primary, reached through a connection made before: an outage, and one
// whose statement was not applied.
func TestAStandbyRefusingAWriteIsAnOutageNothingApplied(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET TRANSACTION READ ONLY`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `CREATE TABLE refused (x int)`)
	if !store.Unreachable(err) || store.MayHaveApplied(err) {
		t.Fatalf("%v: unreachable %t, may have applied %t; want an outage that applied nothing",
			err, store.Unreachable(err), store.MayHaveApplied(err))
	}
}

// ridden runs RideOver over the errors a fake try returns in turn (nil
// when they run out) and returns what the tries were told and RideOver's
// result.
func ridden(t *testing.T, wait time.Duration, errs ...error) ([]bool, error) {
	t.Helper()
	var told []bool
	err := store.RideOver(context.Background(), wait, func(_ context.Context, unknown bool) error {
		told = append(told, unknown)
		if len(told) > len(errs) {
			return nil
		}
		return errs[len(told)-1]
	})
	return told, err
}

// sentLost is an outage after the statements were sent: the connection
// broke under them (pgx wraps such failures so: not safe to retry).
type sentLost struct{}

func (sentLost) Error() string     { return "read: unexpected EOF" }
func (sentLost) SafeToRetry() bool { return false }
func (sentLost) Unwrap() error     { return io.ErrUnexpectedEOF }

// notSent is an outage before anything was sent.
type notSent struct{}

func (notSent) Error() string     { return "write: broken pipe" }
func (notSent) SafeToRetry() bool { return true }
func (notSent) Unwrap() error     { return io.ErrUnexpectedEOF }

func TestRideOverRetriesAnOutageAndSaysWhenAnEarlierTryMayHaveApplied(t *testing.T) {
	t.Parallel()
	refused := &pgconn.ConnectError{}
	told, err := ridden(t, time.Minute, notSent{}, refused, sentLost{}, refused)
	if err != nil {
		t.Fatalf("RideOver: %v", err)
	}
	if want := []bool{false, false, false, true, true}; fmt.Sprint(told) != fmt.Sprint(want) {
		t.Fatalf("tries told unknown %v, want %v: only a try after one that sent its statements must read first", told, want)
	}
}

func TestRideOverGivesUp(t *testing.T) {
	t.Parallel()
	own := errors.New("duplicate key")
	if told, err := ridden(t, time.Minute, own); !errors.Is(err, own) || len(told) != 1 {
		t.Errorf("a try's own error: %d tries, %v; want one, returned as it is", len(told), err)
	}
	if told, err := ridden(t, time.Minute, sentLost{}, sentLost{}, sentLost{}, sentLost{}); !store.Unreachable(err) || len(told) != 3 {
		t.Errorf("a server that keeps ending the session: %d tries, %v; want 3, then the outage", len(told), err)
	}
	refused := &pgconn.ConnectError{}
	start := time.Now()
	told, err := ridden(t, 700*time.Millisecond, refused, refused, refused, refused, refused, refused)
	if !store.Unreachable(err) || len(told) != 3 || time.Since(start) > 5*time.Second {
		t.Errorf("an outage longer than the wait: %d tries in %s, %v; want 3 (0.2 + 0.4 s of pauses), then the outage", len(told), time.Since(start), err)
	}
}
