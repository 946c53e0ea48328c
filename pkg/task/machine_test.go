package task_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// transitions builds the transitions the state machine names.
var transitions = map[string]func(id uuid.UUID) task.Transition{
	"Cancel": func(id uuid.UUID) task.Transition { return task.Cancel(task.Ref{ID: id}, "test") },
	"Retry":  func(id uuid.UUID) task.Transition { return task.Retry(task.Ref{ID: id}) },
	"Resume": func(id uuid.UUID) task.Transition { return task.Resume(task.Ref{ID: id}) },
	"Redub":  func(id uuid.UUID) task.Transition { return task.Redub(task.Ref{ID: id}) },
	"Approve": func(id uuid.UUID) task.Transition {
		return task.Approve(task.Ref{ID: id}, task.StageTranscript)
	},
	// The reconciler's end of a task nothing moved within its bound.
	"Fail": func(id uuid.UUID) task.Transition { return task.Fail(task.Ref{ID: id}, "", "reconciler: test") },
}

// TestEveryStatusHasAWayOut: the state machine (task.Ways) names every
// status once; every status that has not ended moves on by itself within
// a bound the reconciler keeps — but for one that waits for a person
// (review), which no bound applies to — and has an operator action; an ended one has
// an operator action too; and each action and bound, applied to a task in
// the status, moves it where the table says. (The reconciler's tests run
// its passes over the same table: services/reconciler.)
func TestEveryStatusHasAWayOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	var listed []string
	for _, w := range task.Ways {
		listed = append(listed, w.Status)
		if w.Person && (w.Bound != "" || task.Ended(w.Status)) {
			t.Errorf("%s: waits for a person, yet is bounded (%q) or ended", w.Status, w.Bound)
		}
		if !task.Ended(w.Status) && !w.Person && (w.Auto == "" || w.Bound == "" || !task.Ended(w.BoundTo)) {
			t.Errorf("%s: nothing ends it by itself within a bound (auto %q, bound %q to %q)", w.Status, w.Auto, w.Bound, w.BoundTo)
		}
		if len(w.Actions) == 0 {
			t.Errorf("%s: no operator action moves it", w.Status)
		}
		moves := w.Actions
		if w.Bound != "" {
			moves = append(slices.Clone(moves), task.Action{Name: "the bound", Transition: "Fail", To: w.BoundTo})
		}
		for _, a := range moves {
			build, ok := transitions[a.Transition]
			if !ok {
				t.Errorf("%s: %s names transition %q, which is not one of %v", w.Status, a.Name, a.Transition, keys(transitions))
				continue
			}
			id := seed(t, db.Pool, w.Status)
			if _, err := task.Apply(ctx, db.Pool, build(id)); err != nil {
				t.Errorf("%s: %s (%s): %v", w.Status, a.Name, a.Transition, err)
				continue
			}
			if got := read(t, db.Pool, id).status; got != a.To || got == w.Status {
				t.Errorf("%s: %s leaves the task %s, want %s", w.Status, a.Name, got, a.To)
			}
		}
	}
	if !slices.Equal(listed, task.Statuses) {
		t.Errorf("the state machine lists %v, want every status once, in order: %v", listed, task.Statuses)
	}
}

// TestTheREADMEShowsTheStateMachine: the operators' documentation holds
// the table of task.Ways as WaysMarkdown writes it (docs/operations.md, the
// operators' page the README links).
func TestTheREADMEShowsTheStateMachine(t *testing.T) {
	t.Parallel()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), task.WaysMarkdown()) {
		t.Errorf("docs/operations.md lacks the task states table; put this in it:\n%s", task.WaysMarkdown())
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
