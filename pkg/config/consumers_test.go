package config_test

import (
	"testing"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/cores"
)

// TestConsumersBySizeOfTheWorker: without WORKER_CONCURRENCY a worker
// runs a consumer per core it sees (asr one more); a setting wins.
func TestConsumersBySizeOfTheWorker(t *testing.T) {
	t.Parallel()
	var unset, set config.Common
	if err := config.Load(map[string]string{}, &unset); err != nil {
		t.Fatal(err)
	}
	if err := config.Load(map[string]string{"WORKER_CONCURRENCY": "3"}, &set); err != nil {
		t.Fatal(err)
	}
	n := cores.Usable()
	for _, tc := range []struct {
		c    *config.Common
		step string
		want int
	}{{&unset, "tts", n}, {&unset, "asr", n + 1}, {&set, "tts", 3}, {&set, "asr", 3}} {
		if got := tc.c.Consumers(tc.step); got != tc.want {
			t.Errorf("%s with WORKER_CONCURRENCY %v: %d consumers, want %d", tc.step, tc.c.Concurrency, got, tc.want)
		}
	}
}
