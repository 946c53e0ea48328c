package inspect

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// fake answers every queue asked with its ready messages, or fails.
type fake struct {
	ready map[string]int
	err   error
	asked []string
}

func (f *fake) Inspect(_ context.Context, names []string) (map[string]State, error) {
	f.asked = names
	if f.err != nil {
		return nil, f.err
	}
	out := map[string]State{}
	for _, n := range names {
		if r, ok := f.ready[n]; ok {
			out[n] = State{Name: n, Ready: r, Consumers: 1}
		} else {
			out[n] = State{Name: n, Missing: true}
		}
	}
	return out, nil
}

// TestCollectorExportsTheWatchedQueues: every watched queue is asked for,
// those that exist are exported, and a failed read exports the last.
func TestCollectorExportsTheWatchedQueues(t *testing.T) {
	t.Parallel()
	f := &fake{ready: map[string]int{wire.QueueDLQ: 4}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(f))
	gather := func() map[string]float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range families {
			for _, m := range mf.GetMetric() {
				out[mf.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	want := map[string]float64{"dubflow_queue_messages/" + wire.QueueDLQ: 4, "dubflow_queue_consumers/" + wire.QueueDLQ: 1}
	if got := gather(); len(got) != 2 || got["dubflow_queue_messages/"+wire.QueueDLQ] != 4 {
		t.Fatalf("exported %v, want %v", got, want)
	}
	if len(f.asked) != len(Watched()) || !slices.Contains(f.asked, wire.QueueWaiting) {
		t.Fatalf("asked %v, want every watched queue", f.asked)
	}
	f.err = errors.New("broker gone")
	if got := gather(); len(got) != 2 {
		t.Fatalf("after a failed read: %v, want the last", got)
	}
}

// TestWatchedQueuesHaveTheirKind: each work queue, the delay tiers, the
// dead letters, the compensation and the waiting queue.
func TestWatchedQueuesHaveTheirKind(t *testing.T) {
	t.Parallel()
	kinds := map[string]int{}
	for _, q := range Watched() {
		kinds[q.Kind]++
	}
	if kinds["work"] != len(wire.WorkQueues) || kinds["delay"] == 0 || kinds["dlq"] != 1 || kinds["compensation"] != 1 || kinds["waiting"] != 1 {
		t.Fatalf("kinds %v", kinds)
	}
}
