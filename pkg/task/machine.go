package task

import (
	"fmt"
	"strings"
)

// Way is how a task leaves one status: on its own, within a bound, and by
// an operator's action. Ways lists one for every status; the README's
// operator section shows it as a table (WaysMarkdown), and the tests check
// that each action and bound moves the task as written.
type Way struct {
	Status string
	// Auto says what moves the task on by itself ("" for an ended task:
	// nothing does).
	Auto string
	// Bound names the setting (and its default) that bounds how long a
	// task may stay in the status when nothing moves it; BoundTo is where
	// the reconciler then takes it, with the reason as its error.
	Bound, BoundTo string
	// Person is set for a status that waits for a person, not for work:
	// no bound applies, since nothing runs and nothing is owed — the
	// reconciler and the health checks never count such a task stuck
	// (review).
	Person bool
	// Actions are the operators' ways out.
	Actions []Action
}

// Action is an operator's way out of a status.
type Action struct {
	// Name is the action as the doors name it.
	Name string
	// Doors are where an operator takes it.
	Doors string
	// Transition names the transition it applies (Cancel, Retry, Resume,
	// Redub), and To the status the task then has.
	Transition, To string
}

// Ways is the task state machine, status by status.
var Ways = []Way{
	{Status: Queued, Auto: "extract_audio takes its first message and the task runs (a lost message is re-driven by the reconciler)",
		Bound: "RECONCILE_TASK_MAX_IDLE_SECONDS (24 h) without progress", BoundTo: Failed,
		Actions: []Action{cancelAction}},
	{Status: Running, Auto: "each step's success moves it on: to done, to compensating (speech that could not be synthesized), to failed (a dead letter); lost messages are re-driven",
		Bound: "RECONCILE_TASK_MAX_IDLE_SECONDS (24 h) without progress and no step running", BoundTo: Failed,
		Actions: []Action{cancelAction}},
	{Status: Compensating, Auto: "a requeue whose synthesis still fails after TTS_MAX_REQUEUES (3) requeues fails it",
		Bound: "RECONCILE_COMPENSATING_MAX_SECONDS (72 h)", BoundTo: Failed,
		Actions: []Action{
			{Name: "requeue", Doors: "`tts_requeue`, the console's Compensations page", Transition: "Resume", To: Running},
			{Name: "retry, with another speaker if asked", Doors: "console Retry (`POST /api/tasks/{id}/retry`), `dubctl retry`", Transition: "Resume", To: Running},
			cancelAction}},
	{Status: Review, Person: true,
		Auto: "nothing: it waits for a person's edits of its lines (never stuck, never alerted)",
		Actions: []Action{
			{Name: "approve", Doors: "console Approve (`POST /api/tasks/{id}/review/approve`), `dubctl review approve`", Transition: "Approve", To: Running},
			cancelAction}},
	{Status: Done, Actions: []Action{
		{Name: "redub a line", Doors: "console Redub, `dubctl redub`", Transition: "Redub", To: Running}}},
	{Status: Failed, Actions: []Action{retryAction,
		{Name: "replay its dead letter", Doors: "console Dead letters, `dubctl dlq replay`", Transition: "Retry", To: Running}}},
	{Status: Cancelled, Actions: []Action{retryAction}},
}

var (
	cancelAction = Action{Name: "cancel", Doors: "console Cancel (`POST /api/tasks/{id}/cancel`), `dubctl cancel`", Transition: "Cancel", To: Cancelled}
	retryAction  = Action{Name: "retry from the failed step, with another speaker if asked",
		Doors: "console Retry (`POST /api/tasks/{id}/retry`), `dubctl retry`", Transition: "Retry", To: Running}
)

// WaysMarkdown is Ways as the README's table: each status, how it
// progresses on its own, and the operator actions that move it.
func WaysMarkdown() string {
	var b strings.Builder
	b.WriteString("| status | on its own | bound | operator actions |\n|---|---|---|---|\n")
	for _, w := range Ways {
		auto, bound := w.Auto, "—"
		if auto == "" {
			auto = "nothing: the task ended"
		}
		if w.Bound != "" {
			bound = fmt.Sprintf("%s, then %s", w.Bound, w.BoundTo)
		}
		var acts []string
		for _, a := range w.Actions {
			acts = append(acts, fmt.Sprintf("%s → %s (%s)", a.Name, a.To, a.Doors))
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", w.Status, auto, bound, strings.Join(acts, "; "))
	}
	return b.String()
}
