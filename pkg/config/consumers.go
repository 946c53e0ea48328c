package config

import "github.com/dubflow/dubflow/pkg/cores"

// Consumers is how many messages the worker of step handles at once:
// WORKER_CONCURRENCY when set, else one per core the worker sees
// (cores.Usable: its CPUs bounded by a cgroup quota) and for asr one more,
// whose consumer takes another task's chunk at once rather than queueing
// it behind a long video's chunks.
func (c *Common) Consumers(step string) int {
	if c.Concurrency != nil {
		return *c.Concurrency
	}
	if step == "asr" {
		return cores.Usable() + 1
	}
	return cores.Usable()
}
