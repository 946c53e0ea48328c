package engines

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// TestAMembersStateIsWhatItCanDoNow: an open breaker is broken; a member
// waiting for its time, out of quota or at its concurrency is limited.
func TestAMembersStateIsWhatItCanDoNow(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	status := func(breaker string, next time.Duration, left, concurrency, inFlight int) pool.Status {
		var m pool.Status
		m.Breaker, m.NextAt, m.Left, m.Concurrency, m.InFlight = breaker, now.Add(next), int64(left), concurrency, inFlight
		return m
	}
	for _, c := range []struct {
		m    pool.Status
		want string
	}{
		{status("closed", 0, -1, 0, 0), "ready"},
		{status("open", 0, 5, 0, 0), "broken"},
		{status("closed", time.Second, 5, 0, 0), "limited"},
		{status("closed", 0, 0, 0, 0), "limited"},
		{status("closed", 0, 5, 2, 2), "limited"},
		{status("closed", 0, 5, 2, 1), "ready"},
	} {
		if got := memberState(c.m, now); got != c.want {
			t.Errorf("%+v: %s, want %s", c.m, got, c.want)
		}
	}
}

// TestEnginesAreInThePipelinesOrder: by step as the pipeline runs them,
// the members of a step in the order read.
func TestEnginesAreInThePipelinesOrder(t *testing.T) {
	t.Parallel()
	es := []View{{Status: pool.Status{Step: "tts", Name: "espeak"}}, {Status: pool.Status{Step: "asr", Name: "a"}},
		{Status: pool.Status{Step: "translate", Name: "t"}}, {Status: pool.Status{Step: "asr", Name: "b"}}}
	sortEngines(es)
	got := ""
	for _, e := range es {
		got += e.Name
	}
	if got != "abtespeak" {
		t.Fatalf("order %s, want a b t espeak", got)
	}
}

// TestAStepWithoutEnginesIsRefused: only asr, translate and tts have
// engines; another step is a 400 before anything is read.
func TestAStepWithoutEnginesIsRefused(t *testing.T) {
	t.Parallel()
	_, err := List(context.Background(), nil, "mux_video", time.Now())
	if ae, ok := apierr.As(err); !ok || ae.Status != http.StatusBadRequest {
		t.Fatalf("mux_video: %v, want a 400", err)
	}
}
