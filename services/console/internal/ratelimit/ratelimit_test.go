package ratelimit

import (
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
)

func TestLoginLimiterCountsEachAddressAndRefills(t *testing.T) {
	t.Parallel()
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	l := New(6, 1) // one attempt each 10 s
	l.now = clock.Now
	if ok, _ := l.Allow("10.0.0.1"); !ok {
		t.Fatal("first attempt refused")
	}
	ok, wait := l.Allow("10.0.0.1")
	if ok || wait != 10*time.Second {
		t.Fatalf("second attempt: allowed %v, wait %v; want refused for 10s", ok, wait)
	}
	if ok, _ := l.Allow("10.0.0.2"); !ok {
		t.Fatal("another address was refused")
	}
	clock.Advance(10 * time.Second)
	if ok, _ := l.Allow("10.0.0.1"); !ok {
		t.Fatal("attempt after the refill refused")
	}
	// A refused attempt does not push the next one further out.
	clock.Advance(5 * time.Second)
	if ok, wait := l.Allow("10.0.0.1"); ok || wait != 5*time.Second {
		t.Fatalf("early attempt: allowed %v, wait %v; want refused for 5s", ok, wait)
	}
	clock.Advance(5 * time.Second)
	if ok, _ := l.Allow("10.0.0.1"); !ok {
		t.Fatal("refused attempts delayed the refill")
	}
	l.forgetIdle(clock.Now().Add(time.Minute))
	if len(l.clients) != 0 {
		t.Fatalf("%d idle addresses kept", len(l.clients))
	}
}
