package step

import "math"

// Uncombined makes r send each claim and each commit in a round trip of its
// own, as the runtime did before the combiner: the benchmark's baseline.
func Uncombined(r *Runner) {
	r.claims = newCombiner(r.cfg.Pool, 1, math.MaxInt)
	r.commits = newCombiner(r.cfg.Pool, 1, math.MaxInt)
}

// ObserveWait counts a claimed attempt's queue wait on m, as a claim does.
func ObserveWait(m *Metrics, step, project string, seconds float64) { m.waited(step, project, seconds) }

// Decided records outcome as the runtime's decision for msg's run, as the
// runner does after the handler returned (Message.OnOutcome).
func Decided(msg *Message, outcome string) { msg.decided(outcome) }
