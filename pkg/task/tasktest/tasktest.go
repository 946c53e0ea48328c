// Package tasktest makes tasks rows for tests through the task lifecycle's
// own transitions, so that a fixture is a task the pipeline could have
// left behind.
package tasktest

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// Done creates a task from en into es (speaker "es", the default keys) and
// takes it through running to done, as a finished dub; it returns the id.
func Done(t testing.TB, ctx context.Context, q task.Querier, traceID string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	ref := task.Ref{ID: id}
	for _, tr := range []task.Transition{
		task.Create(task.Details{ID: id, SourceLanguage: "en", TargetLanguage: "es", SpeakerID: "es",
			SourceVideoKey: keys.SourceVideo, OutputVideoKey: keys.OutputVideo, TraceID: traceID}),
		task.Start(ref), task.Succeed(ref, nil, ""),
	} {
		if _, err := task.Apply(ctx, q, tr); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
	}
	return id
}
