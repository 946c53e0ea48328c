package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/stream"
)

// restreamLogged re-makes the re-dub's lines in the growing stream too (a
// task without a stream has nothing to re-make). A failure is the
// stream's, not the task's: recorded and logged.
func (j *job) restreamLogged(ctx context.Context, msg *step.Message) {
	if err := j.restream(ctx); err != nil && ctx.Err() == nil {
		msg.Log.Warn().Err(err).Msg("stream not re-made")
		_ = stream.Failed(ctx, j.h.db, j.p.TaskID, err.Error())
	}
}

// restream re-makes, after a re-dub's run built its output (version
// j.p.Version), the stream's batches that its new lines touch, from the
// re-dub's own dub track — what final.mp4 of the version plays — and stores
// the playlists of the version: a player that reloads the stream hears the
// new lines. Lines whose clip is of this version are the re-dubbed ones; a
// line's stretch runs to where the next one starts (its clip may borrow
// that silence).
func (j *job) restream(ctx context.Context) error {
	id := j.p.TaskID
	st, err := stream.Load(ctx, j.h.db, id)
	if errors.Is(err, stream.ErrNone) {
		return nil
	}
	if err != nil {
		return err
	}
	mark := fmt.Sprintf("/v%d/", j.p.Version)
	var touched []stream.Batch
	for _, b := range st.Batches {
		for i, s := range j.segs {
			end := j.totalMS
			if i+1 < len(j.segs) {
				end = j.segs[i+1].startMS
			}
			if strings.Contains(s.key, mark) && s.startMS < b.ToMS && end > b.FromMS {
				touched = append(touched, b)
				break
			}
		}
	}
	if len(touched) == 0 {
		return nil
	}
	video, err := media.PlanStreamVideo(ctx, j.video, j.totalMS)
	if err != nil {
		return fmt.Errorf("stream %s: %w", j.p.SourceVideoKey, err)
	}
	remade := make([]stream.Batch, 0, len(touched))
	for _, b := range touched {
		nb, err := j.remake(ctx, st, b, video)
		if err != nil {
			return err
		}
		remade = append(remade, nb)
	}
	if err := stream.Replace(ctx, j.h.db, id, j.p.Version, remade); err != nil {
		return err
	}
	return stream.Store(ctx, j.h.db, j.h.objects, id, st.Folder(), j.dstLang)
}

// remake makes batch b again from the version's dub track and stores it
// in the stream's folder, its names after v<n>-.
func (j *job) remake(ctx context.Context, st *stream.State, b stream.Batch, video media.StreamVideo) (stream.Batch, error) {
	dir, err := os.MkdirTemp(j.dir, "stream-*")
	if err != nil {
		return b, fmt.Errorf("make temp dir: %w", err)
	}
	channels := j.report.Mix.Channels
	cut := filepath.Join(dir, "dub.wav")
	if err := media.CutSoundtrack(ctx, j.dubWav, b.FromMS, b.ToMS, channels, cut); err != nil {
		return b, err
	}
	made, err := media.StreamSegments(ctx, media.StreamInput{Video: j.video, Plan: video, Dub: cut, FromMS: b.FromMS, ToMS: b.ToMS,
		Channels: channels, Last: b.ToMS >= j.totalMS, Dir: dir, MaxBytes: j.h.cfg.MaxVideoBytes})
	if err != nil {
		return b, fmt.Errorf("stream %s: %w", j.p.SourceVideoKey, err)
	}
	sj := &streamJob{job: *j, id: j.p.TaskID, init: st.Init, video: video}
	sj.dir = dir
	for i, s := range j.segs {
		end := max(s.endMS, j.totalMS)
		if i+1 < len(j.segs) {
			end = max(s.endMS, j.segs[i+1].startMS)
		}
		if s.startMS < b.ToMS && end > b.FromMS {
			sj.segs = append(sj.segs, s) // the lines the batch plays, as a stream batch's
		}
	}
	return sj.storeAs(ctx, made, b.FromMS, b.ToMS, st.Folder(), fmt.Sprintf("v%d-", j.p.Version))
}
