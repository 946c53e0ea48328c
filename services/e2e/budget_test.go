package e2e

import (
	"context"
	"testing"
	"time"
)

// budget is what one task of the 11 s jfk clip may cost each step: the
// Postgres statements run for it (lease extensions apart) and the broker
// messages (published + settled), each 25 % over what it cost when the
// budget was set. Set 2026-11-28 (extract_audio 9, asr 9, translate 10,
// tts 19, mux_video 7 statements); re-set 2026-12-02 to what issues 47–51
// added on purpose (cancel, task plans, review, projects): translate and
// tts read the task's engine scope, extract_audio checks the project and
// admits asr into the project's window, asr charges the project's shared
// minutes (one SQL call, charge_shared), counts its crowding and releases
// the window, mux_video reads the task's plan. A change
// that costs a step more than that fails TestTaskBudget; a change that
// costs less should lower the budget with it.
var budget = map[string]struct{ statements, broker float64 }{
	"extract_audio": {statements: 11 * headroom, broker: 3 * headroom},
	"asr":           {statements: 12 * headroom, broker: 2 * headroom},
	"translate":     {statements: 11 * headroom, broker: 2 * headroom},
	"tts":           {statements: 20 * headroom, broker: 2 * headroom},
	"mux_video":     {statements: 8 * headroom, broker: 2 * headroom},
}

// headroom is the margin of the budget over the measured cost.
const headroom = 1.25

// TestTaskBudget dubs the 11 s clip through the five worker processes and
// holds each step to its database and broker budget per task, read from
// the workers' own counters.
func TestTaskBudget(t *testing.T) {
	s := newStack(t, nil)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	video := fixtureVideo(t, ctx, "jfk.wav", 0)
	before := s.costs(t)
	s.dub(t, ctx, video, 8*time.Minute)
	got := s.costsSince(t, ctx, before)
	t.Logf("one task of the 11 s clip:\n%s", costTable(got, 1))
	for _, w := range workers {
		c, max := got[w], budget[w]
		if c.Statements == 0 || c.Broker() == 0 {
			t.Errorf("%s: %v statements, %v broker messages counted: the counters miss the step", w, c.Statements, c.Broker())
		}
		if c.Statements > max.statements {
			t.Errorf("%s: %v Postgres statements per task, budget %v", w, c.Statements, max.statements)
		}
		if c.Broker() > max.broker {
			t.Errorf("%s: %v broker messages per task (%v published, %v settled), budget %v",
				w, c.Broker(), c.Published, c.Settled, max.broker)
		}
	}
}
