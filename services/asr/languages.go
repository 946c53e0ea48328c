package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
)

// A task that dubs into several languages at once is a parent (task.Spawn,
// tasks.targets): extract_audio and asr run once, as for any task, but its
// asr sends no translate batch of its own. The part that completes the step
// — the whole audio when it was not cut into chunks, else the merge —
// spawns one child task per language in its success transaction, each
// starting with the parent's segments and translating, synthesizing and
// muxing like any task; the parent ends when its last child does (in
// pkg/task).

// copier copies an object of one task to the key of another, server-side
// (blob.Store.Copy).
type copier interface {
	Copy(ctx context.Context, kind string, src, dst blob.Ref) error
}

// spawnChildren ends the asr step of a parent. It first places the parent's
// video under each child's key (a server-side copy, so that nothing of a
// child runs before its video is there; a repeated copy rewrites the same
// bytes, an outage of the store hands the step back), then stages the
// children and their translate batches of ids, each sent once however often
// this runs (step.Message.EmitFor). A parent whose video is gone fails here
// for good: its children could only fail at their mux.
func (h *handler) spawnChildren(ctx context.Context, msg *step.Message, p wire.ASR, t taskInfo, ids []string) error {
	env := msg.Envelope
	src := blob.Ref{Task: env.TaskID, Key: cmp.Or(t.sourceVideoKey, wire.DefaultKeys(env.TaskID).SourceVideo)}
	for _, language := range t.targets {
		child := wire.ChildTaskID(env.TaskID, language)
		dst := blob.Ref{Task: child, Key: wire.DefaultKeys(child).SourceVideo}
		if err := h.videos.Copy(ctx, wire.KindVideo, src, dst); err != nil {
			return fmt.Errorf("place the video of the %s child: %w", language, err)
		}
	}
	size := h.batchSize()
	for _, language := range t.targets {
		msg.Apply(task.Spawn(task.RefOf(env), language))
		child := wire.ChildTaskID(env.TaskID, language)
		for batch := range slices.Chunk(ids, size) {
			if err := msg.EmitFor(child, wire.StepTranslate, wire.Translate{TaskID: child, SegmentIDs: batch,
				SourceLanguage: p.Language, TargetLanguage: language, BatchSize: size}); err != nil {
				return err
			}
		}
	}
	msg.Log.Info().Strs("languages", t.targets).Int("segments", len(ids)).Msg("transcribed once; one child task per language")
	return nil
}
