package ops

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCountersAreRegisteredUnderTheirNames(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	Counter(reg, "dubflow_test_plain_total", "A plain counter.").Inc()
	Counters(reg, "dubflow_test_labelled_total", "A labelled counter.", "step").WithLabelValues("asr").Add(2)
	if n, err := testutil.GatherAndCount(reg, "dubflow_test_plain_total", "dubflow_test_labelled_total"); err != nil || n != 2 {
		t.Fatalf("gathered %d series (%v), want 2", n, err)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	Counter(reg, "dubflow_test_plain_total", "Again.")
}
