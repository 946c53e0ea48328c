package main

import (
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
)

// queueConfig is the queue's processing settings in force: the run-time
// settings (system_config, seeded from QUEUE_PROCESS_BATCH_SIZE,
// QUEUE_PROCESS_MAX_WORKERS, QUEUE_PROCESS_RETRY_DELAY_SECONDS,
// QUEUE_PROCESS_MAX_RETRIES and QUEUE_RESERVATION_TIMEOUT_SECONDS) over
// the configuration read at start.
func queueConfig(cfg *Config, s *setting.Watch) queue.Config {
	c := cfg.Queue()
	c.BatchSize = s.Int(setting.CentralBatchSize)
	c.MaxWorkers = s.Int(setting.ConcurrentWorkers)
	c.RetryDelay = s.Seconds(setting.PendingRetryInterval)
	c.MaxRetries = s.Int(setting.PendingMaxRetries)
	c.ReservationTimeout = s.Seconds(setting.ReservationTimeout)
	return c
}

// configureLive keeps q on the settings in force: each change reaches the
// next scan and assignment.
func configureLive(q *queue.Queue, cfg *Config, s *setting.Watch) {
	s.OnChange(func() { q.Configure(queueConfig(cfg, s)) })
}
