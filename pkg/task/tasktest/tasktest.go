// Package tasktest makes tasks rows for tests through the task lifecycle's
// own transitions, so that a fixture is a task the pipeline could have
// left behind.
package tasktest

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/internal/attempt"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// Done creates a task from en into es (speaker "es", the default keys) and
// takes it through running to done, as a finished dub, each step of the
// pipeline recorded as succeeded once (its output exists: the read model
// lists it as version 1); it returns the id.
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
	var n int
	st := attempt.RecordSucceeded(id, wire.Pipeline, "tasktest")
	if err := q.QueryRow(ctx, st.SQL, st.Args...).Scan(&n); err != nil {
		t.Fatalf("steps of task %s: %v", id, err)
	}
	return id
}

// InReview creates a task from en into es that reviews stage (and the
// stages after it named in also) and takes it, as the asr or translate
// worker would, through running to review at stage: extract_audio and asr
// recorded as succeeded (and translate, for the translation's stage). The
// caller adds its lines (segments); it returns the id.
func InReview(t testing.TB, ctx context.Context, q task.Querier, stage string, also ...string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	ref := task.Ref{ID: id}
	steps := []string{wire.StepExtractAudio, wire.StepASR}
	if stage == task.StageTranslation {
		steps = append(steps, wire.StepTranslate)
	}
	for _, tr := range []task.Transition{
		task.Create(task.Details{ID: id, SourceLanguage: "en", TargetLanguage: "es", SpeakerID: "es",
			SourceVideoKey: keys.SourceVideo, OutputVideoKey: keys.OutputVideo, TraceID: "trace-review",
			Review: append([]string{stage}, also...)}),
		task.Start(ref), task.Hold(task.Ref{ID: id, Step: steps[len(steps)-1]}, stage),
	} {
		if _, err := task.Apply(ctx, q, tr); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
	}
	var n int
	st := attempt.RecordSucceeded(id, steps, "tasktest")
	if err := q.QueryRow(ctx, st.SQL, st.Args...).Scan(&n); err != nil {
		t.Fatalf("steps of task %s: %v", id, err)
	}
	return id
}
