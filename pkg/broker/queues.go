package broker

import "github.com/dubflow/dubflow/pkg/wire"

// Queues names every queue t declares: the dead-letter and compensation
// queues, mux_video's events, the work queues, the waiting queue and the
// delay tiers.
func (t Topology) Queues() []string {
	qs := append([]string{wire.QueueDLQ, wire.QueueTTSCompensation, wire.QueueStreamEnd}, wire.WorkQueues...)
	qs = append(qs, wire.QueueWaiting)
	for _, tier := range t.tiers() {
		qs = append(qs, wire.DelayQueue(tier))
	}
	return qs
}
