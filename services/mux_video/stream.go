package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/stream"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// streamJob makes one batch of a task's growing stream (wire.MuxVideo's
// StreamAfter): the stretch of the timeline from where the stream is made
// to where every line is final, as HLS pieces under
// outputs/{task_id}/stream/, then the playlists again.
type streamJob struct {
	job
	id   uuid.UUID
	plan stream.Plan
	init stream.Init
	// video is how the stream takes the source's video (its offset shifts
	// the subtitles too).
	video media.StreamVideo
}

// stream runs a stream message. A stream never fails its task: what goes
// wrong is recorded on the stream (its last_error) and logged, and the next
// stream message of the task tries again from where the stream is made.
//
// One process makes one task's stream one run at a time: a message that
// arrives while a run of its task is going on leaves it to that run, which
// plans once more before it stops (its stretch may be final only now), so
// that two consumers never make the same stretch at once.
func (h *handler) stream(ctx context.Context, msg *step.Message, p wire.MuxVideo) error {
	id := msg.Envelope.TaskID
	if !h.streaming.start(id) {
		msg.Log.Debug().Msg("the task's stream is being made here: that run plans again")
		return nil
	}
	for {
		err := h.makeBatches(ctx, msg, p)
		if err != nil && ctx.Err() == nil {
			msg.Log.Warn().Err(err).Msg("stream batch not made")
			err = stream.Failed(ctx, h.db, id, err.Error())
		}
		if err != nil || !h.streaming.again(id) {
			h.streaming.stop(id)
			return err
		}
	}
}

// A stream's tools yield the cores to the work tasks wait for (asr's
// decodes, final muxes): the first minute a little (headNice), for someone
// waits to watch it; the rest fully (tailNice), for the stream runs far
// ahead of a player by then.
const (
	headNice, tailNice = 10, 19
	headMS             = 60_000
)

// streamNice is the niceness of the ffmpeg runs of a batch from fromMS.
func streamNice(fromMS int) int {
	if fromMS < headMS {
		return headNice
	}
	return tailNice
}

// flights are the tasks whose stream is being made, each with whether
// another message came meanwhile.
type flights struct {
	mu      sync.Mutex
	running map[uuid.UUID]bool // task → another message came
}

// start marks task's stream as being made; false when it already is (the
// run is told to plan again).
func (f *flights) start(task uuid.UUID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == nil {
		f.running = map[uuid.UUID]bool{}
	}
	if _, ok := f.running[task]; ok {
		f.running[task] = true
		return false
	}
	f.running[task] = false
	return true
}

// again reports whether a message came during the run, and clears it.
func (f *flights) again(task uuid.UUID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	came := f.running[task]
	f.running[task] = false
	return came
}

// stop ends the run.
func (f *flights) stop(task uuid.UUID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.running, task)
}

// maxBatches bounds the batches one stream message makes.
const maxBatches = 1000

// makeBatches makes the stream's next batches while one is final: a
// batch made by another run meanwhile (two messages of one task at once)
// only moves where the next one starts, so the last message to run always
// reaches as far as the timeline is final.
func (h *handler) makeBatches(ctx context.Context, msg *step.Message, p wire.MuxVideo) error {
	last := -1
	for range maxBatches {
		plan, init, err := stream.Next(ctx, h.db, msg.Envelope.TaskID)
		if err != nil {
			return err
		}
		if !plan.Ok || plan.FromMS == last {
			// Nothing final, or nothing this run could make of it (lines
			// past the end of the video): the stream stays where it is.
			msg.Log.Debug().Int("made_until_ms", plan.FromMS).Msg("no new stretch of the stream is final")
			return nil
		}
		last = plan.FromMS
		if err := h.makeBatch(ctx, msg, p, plan, init); err != nil {
			return err
		}
	}
	return nil
}

// makeBatch makes the batch plan says.
func (h *handler) makeBatch(ctx context.Context, msg *step.Message, p wire.MuxVideo, plan stream.Plan, init stream.Init) error {
	ctx = media.Yielding(ctx, streamNice(plan.FromMS))
	id := msg.Envelope.TaskID
	j := &streamJob{job: job{h: h, p: p, opts: h.options(p.Options)}, id: id, plan: plan, init: init}
	var err error
	if err := h.db.QueryRow(ctx, `SELECT source_language, target_language, source_probe FROM tasks WHERE id = $1`, id).
		Scan(&j.srcLang, &j.dstLang, &j.probe); err != nil {
		return fmt.Errorf("read task %s: %w", id, err)
	}
	if j.dir, err = scratch(); err != nil {
		return err
	}
	defer os.RemoveAll(j.dir)
	return j.run(ctx, msg)
}

// run makes the batch and records it.
func (j *streamJob) run(ctx context.Context, msg *step.Message) error {
	j.last = time.Now()
	src, release, err := j.h.kept.get(ctx, j.id, j.p.SourceVideoKey, scratch, j.fetchSource)
	if err != nil {
		return err
	}
	ended, err := j.runOn(ctx, msg, src)
	release(err == nil && !ended)
	return err
}

// fetchSource downloads and checks the task's source into dir and plans
// its stream's video.
func (j *streamJob) fetchSource(ctx context.Context, dir string) (*source, error) {
	cfg := j.h.cfg
	s := &source{path: filepath.Join(dir, "source.media")}
	if err := blob.Download(ctx, j.h.objects, j.p.SourceVideoKey, s.path, blob.Need{MaxBytes: cfg.MaxVideoBytes, Setting: "MAX_VIDEO_BYTES"}); err != nil {
		return nil, err
	}
	info, err := j.probeVideo(ctx, s.path, media.Limits{RequireVideo: true, MaxDuration: cfg.MaxDuration()})
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", j.p.SourceVideoKey, j.h.explain(err))
	}
	s.info = info
	if s.video, err = media.PlanStreamVideo(ctx, s.path, int(info.Duration.Milliseconds())); err != nil {
		return nil, fmt.Errorf("stream %s: %w", j.p.SourceVideoKey, err)
	}
	return s, nil
}

// runOn makes the batch from the kept source; ended says it ended the
// stream.
func (j *streamJob) runOn(ctx context.Context, msg *step.Message, src *source) (ended bool, err error) {
	j.video = src.video
	totalMS := int(src.info.Duration.Milliseconds())
	from, to := j.plan.FromMS, min(j.plan.ToMS, totalMS)
	if j.plan.Final {
		to = totalMS
	} else {
		// A copied video's batch ends on a key frame.
		to = src.video.Cut(from, to)
	}
	if to <= from {
		return false, nil
	}
	if j.segs, err = j.h.batchSegments(ctx, j.id, from, to); err != nil {
		return false, err
	}
	j.lap("video")
	dub, start := filepath.Join(j.dir, "dub.wav"), from
	if len(j.segs) > 0 {
		start = min(from, j.segs[0].startMS) // a line begun in the batch before
	}
	if err := j.assembleBatch(ctx, src, start, to, totalMS, dub); err != nil {
		return false, err
	}
	j.lap("assemble")
	pieces := filepath.Join(j.dir, "pieces")
	if err := os.Mkdir(pieces, 0o700); err != nil {
		return false, fmt.Errorf("make temp dir: %w", err)
	}
	made, err := media.StreamSegments(ctx, media.StreamInput{Video: src.path, Plan: src.video, Dub: dub, DubFromMS: from - start,
		FromMS: from, ToMS: to, Channels: soundChannels(src.info), Last: to >= totalMS, Dir: pieces, MaxBytes: j.h.cfg.MaxVideoBytes})
	if err != nil {
		return false, fmt.Errorf("stream %s: %w", j.p.SourceVideoKey, j.h.explain(err))
	}
	j.lap("segments")
	return j.record(ctx, msg, made, from, to, totalMS)
}

// record stores the batch's files, records it and stores the playlists.
func (j *streamJob) record(ctx context.Context, msg *step.Message, made *media.StreamBatch, from, to, totalMS int) (bool, error) {
	batch, err := j.storeAs(ctx, made, from, to, stream.Dir(j.p.OutputVideoKey), "")
	if err != nil {
		return false, err
	}
	j.lap("store")
	ended := to >= totalMS
	ok, err := stream.Record(ctx, j.h.db, j.id, batch, totalMS, ended, j.init)
	if err != nil || !ok {
		if err == nil {
			msg.Log.Info().Int("from_ms", from).Msg("another run made this stretch of the stream first")
		}
		return false, err
	}
	ev := msg.Log.Info().Int("from_ms", from).Int("to_ms", to).Int("pieces", len(batch.Pieces)).Bool("ended", ended).
		Bool("video_copied", j.video.Copy)
	for _, l := range j.laps { // where the time went: video, assemble, segments, store
		ev = ev.Float64(l.name+"_s", l.took.Seconds())
	}
	ev.Msg("stream batch made")
	return ended, stream.Store(ctx, j.h.db, j.h.objects, j.id, stream.Dir(j.p.OutputVideoKey), j.dstLang)
}

// batchSegments reads the lines the batch [from, to) plays, each with
// its clip: those that start in it, and the one begun before it whose
// stretch runs into it (a copied video's batches end on key frames, not
// where lines start), in order, the last knowing where the next line
// starts.
func (h *handler) batchSegments(ctx context.Context, id uuid.UUID, from, to int) ([]segment, error) {
	type row struct {
		segment
		key    *string
		params []byte
		next   *int
	}
	rows, err := dub.ReadSegments(ctx, h.db, id, func(r pgx.CollectableRow) (row, error) {
		var s row
		err := r.Scan(&s.idx, &s.startMS, &s.endMS, &s.src, &s.mt, &s.key, &s.params, &s.next)
		return s, err
	}, `SELECT idx, start_ms, end_ms, src_text, mt, tts_audio_key, params, next_start FROM (
		SELECT idx, start_ms, end_ms, src_text, coalesce(mt_text, '') AS mt, tts_audio_key,
		       coalesce(tts_params_json, '{}') AS params, lead(start_ms) OVER (ORDER BY idx) AS next_start
		  FROM segments WHERE task_id = $1) s
		WHERE start_ms < $3 AND (start_ms >= $2 OR next_start IS NULL OR next_start > $2 OR end_ms > $2)
		ORDER BY idx`, from, to)
	if err != nil {
		return nil, err
	}
	var out []segment
	for _, r := range rows {
		if r.key == nil {
			return nil, fmt.Errorf("segment %d of task %s has no synthesized audio yet", r.idx, id)
		}
		if *r.key != "" {
			if err := wire.CheckKey(*r.key, wire.KindTTS, id); err != nil {
				return nil, fmt.Errorf("segment %d audio key: %w", r.idx, err)
			}
		}
		s := r.segment
		s.key, s.synthRate = *r.key, synthRate(r.params)
		if r.next != nil {
			s.nextMS = *r.next
		}
		out = append(out, s)
	}
	return out, nil
}

// assembleBatch fits the batch's clips as the final run fits them (each
// knowing where the next line starts) and mixes them over the stretch
// [start, to) of the soundtrack into out: start is the batch's start, or
// where the line it begins with started in the batch before.
func (j *streamJob) assembleBatch(ctx context.Context, src *source, start, to, totalMS int, out string) error {
	slots, err := j.h.clips(ctx, j.dir, j.segs)
	if err != nil {
		return err
	}
	if n, last := len(slots), j.segs[len(j.segs)-1]; n > 0 && slots[n-1].Idx == last.idx {
		slots[n-1].NextStartMS = last.nextMS
	}
	placements := media.Fit(slots, media.FitOptions{MaxSpeedup: j.h.cfg.MaxSpeedup, RescueSpeedup: j.h.cfg.RescueSpeedup, TotalMS: totalMS})
	speech := make([]media.Span, 0, len(j.segs))
	for i := range placements {
		placements[i].StartMS -= start
	}
	for _, s := range j.segs {
		speech = append(speech, media.Span{StartMS: s.startMS - start, EndMS: min(s.endMS, to) - start})
	}
	in := media.DubInput{Placements: placements, Clip: func(idx int) string { return clipPath(j.dir, idx) },
		TotalMS: to - start, Speech: speech, Mix: j.opts.mix}
	if channels := soundChannels(src.info); channels > 0 {
		soundtrack := filepath.Join(j.dir, "soundtrack.wav")
		if err := media.CutSoundtrack(ctx, src.path, start, to, channels, soundtrack); err != nil {
			return err
		}
		in.Original, in.OriginalChannels = soundtrack, channels
	}
	if _, err := media.AssembleDub(ctx, in, out); err != nil {
		return fmt.Errorf("assemble the stream's dub of %s: %w", j.p.SourceVideoKey, err)
	}
	return nil
}

// soundChannels is how many channels the dub mixes the source's sound in
// (1 or 2; 0: the source has no sound).
func soundChannels(info *media.Info) int {
	audio := info.StreamsOf(media.AudioStream)
	if len(audio) == 0 {
		return 0
	}
	return min(max(audio[0].Channels, 1), 2)
}

// storeAs uploads the batch's pieces and its subtitles into dir, their
// names after prefix ("" for the first version, "v2-" for a re-dub's), and,
// when the stream has none yet or this batch's differs, its init segment.
func (j *streamJob) storeAs(ctx context.Context, made *media.StreamBatch, from, to int, dir, prefix string) (stream.Batch, error) {
	b := stream.Batch{FromMS: from, ToMS: to}
	init, err := os.ReadFile(made.Init)
	if err != nil {
		return b, fmt.Errorf("read the stream's init segment: %w", err)
	}
	sum := sha256.Sum256(init)
	hash := hex.EncodeToString(sum[:])
	switch {
	case j.init.Key == "":
		j.init = stream.Init{Key: dir + "init.mp4", SHA256: hash, Codecs: media.StreamCodecs(init)}
		b.MapKey = j.init.Key
	case j.init.SHA256 == hash:
		b.MapKey = j.init.Key
	default:
		b.MapKey = fmt.Sprintf("%s%sinit-%09d.mp4", dir, prefix, from)
	}
	ups := []output{{b.MapKey, made.Init, "video/mp4"}}
	for i, p := range made.Pieces {
		key := fmt.Sprintf("%s%sb%09d-%03d.m4s", dir, prefix, from, i)
		ups = append(ups, output{key, p.File, "video/iso.segment"})
		b.Pieces = append(b.Pieces, stream.Piece{Key: key, DurationMS: p.DurationMS})
	}
	b.VTTKey = fmt.Sprintf("%s%sb%09d.vtt", dir, prefix, from)
	vtt := filepath.Join(j.dir, "batch.vtt")
	if err := writeFile(vtt, j.writeVTT); err != nil {
		return b, err
	}
	ups = append(ups, output{b.VTTKey, vtt, "text/vtt"})
	// A batch is a dozen small files: a few at once, not one round trip
	// after another.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(storeAtOnce)
	for _, up := range ups {
		g.Go(func() error {
			if err := j.h.objects.PutFile(gctx, up.key, up.file, up.contentType); err != nil {
				return fmt.Errorf("store %s: %w", up.key, err)
			}
			return nil
		})
	}
	return b, g.Wait()
}

// storeAtOnce is how many of a batch's files are stored at once.
const storeAtOnce = 4

// writeVTT writes the batch's dubbed lines as WebVTT on the task's
// timeline (X-TIMESTAMP-MAP: the stream's timestamps are the timeline's).
func (j *streamJob) writeVTT(w io.Writer) error {
	cues := make([]subtitle.Cue, 0, len(j.segs))
	for _, s := range j.segs {
		cues = append(cues, subtitle.Cue{StartMS: s.startMS, EndMS: s.endMS, Text: s.mt})
	}
	var b bytes.Buffer
	if err := subtitle.WriteVTT(&b, cues); err != nil {
		return err
	}
	body, ok := strings.CutPrefix(b.String(), "WEBVTT\n")
	if !ok {
		return errors.New("subtitles: WebVTT without its header")
	}
	// The video's timestamps run the plan's offset ahead of the timeline
	// (a copied source's reorder delay), in MPEG-TS's 90 kHz.
	mpegts := (j.video.OffsetUS*9 + 50) / 100
	_, err := fmt.Fprintf(w, "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:%d,LOCAL:00:00:00.000\n%s", mpegts, body)
	return err
}
