package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
)

// languagesJSON is the part of `dubctl wait --json` a task of several
// languages adds.
type languagesJSON struct {
	Languages *view.Languages `json:"languages"`
	// OutputPaths are the local files, per language.
	OutputPaths map[string]string `json:"outputPaths"`
}

// TestSeveralLanguages dubs a real-speech clip into Spanish and Catalan in
// one submission, with the audio cut into chunks (so that the merge is the
// asr fan-in), twice at once: through dubctl, and as a message published
// with target_languages and only the parent's video in storage (the system
// copies it to each child). extract_audio and asr run once, on the parent;
// each language is a child task with its own translate, tts and mux_video
// and an output with its own tracks; the parent ends done when both
// children are. Then
// the fan-in message is delivered again and replayed: no child is spawned
// twice and nothing runs again.
func TestSeveralLanguages(t *testing.T) {
	t.Parallel() // each test runs its own stack (database, virtual host, bucket, processes)
	s := newStack(t, map[string]string{"ASR_CHUNK_SECONDS": "5"})
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	video := fixtureVideo(t, ctx, "jfk.wav", 0)
	// An integrator's submission, beside dubctl's: the message published
	// straight to the exchange, the video stored once.
	published := s.publishLanguages(t, ctx, video)
	stdout, stderr, code := s.dubctl(t, ctx, "submit", "--input", video, "--target", "es,ca", "--wait", "--json",
		"--timeout", "8m", "--output", filepath.Join(dir, "jfk.mp4"))
	v := decodeTask(t, stdout, stderr)
	var l languagesJSON
	if err := json.Unmarshal([]byte(stdout), &l); err != nil {
		t.Fatal(err)
	}
	if code != 0 || v.Status != task.Done || l.Languages == nil {
		t.Fatalf("submit --target es,ca --wait: exit %d, %s %q\n%s\n%s", code, v.Status, v.Error, stdout, stderr)
	}
	parent := v.TaskID
	if got := strings.Join(l.Languages.TargetLanguages, ","); got != "es,ca" || len(l.Languages.Children) != 2 {
		t.Fatalf("languages %+v", l.Languages)
	}

	// Each language: a child task, done, with its own output and tracks.
	for i, lang := range []string{"es", "ca"} {
		c := l.Languages.Children[i]
		if c.TargetLanguage != lang || c.TaskID != wire.ChildTaskID(parent, lang) || c.Status != task.Done ||
			c.OutputVideoKey != wire.DefaultKeys(c.TaskID).OutputVideo {
			t.Fatalf("child %d: %+v", i, c)
		}
		out := l.OutputPaths[lang]
		if out != filepath.Join(dir, "jfk."+lang+".mp4") {
			t.Fatalf("output of %s saved as %q", lang, out)
		}
		s.checkLanguageOutput(t, ctx, video, out, lang)
		s.checkChildSteps(t, ctx, parent, c.TaskID)
		s.checkSegments(t, ctx, c.TaskID)
	}
	s.checkParentSteps(t, ctx, parent)
	var result struct {
		Languages map[string]struct {
			TaskID uuid.UUID `json:"task_id"`
			Status string    `json:"status"`
		} `json:"languages"`
	}
	if err := json.Unmarshal(v.Result, &result); err != nil || len(result.Languages) != 2 || result.Languages["ca"].Status != task.Done {
		t.Errorf("parent result %s (%v)", v.Result, err)
	}
	// The two translations differ: each child translated on its own.
	var es, ca string
	if err := s.db.Pool.QueryRow(ctx, `SELECT (SELECT string_agg(mt_text, ' ' ORDER BY idx) FROM segments WHERE task_id = $1),
		(SELECT string_agg(mt_text, ' ' ORDER BY idx) FROM segments WHERE task_id = $2)`,
		wire.ChildTaskID(parent, "es"), wire.ChildTaskID(parent, "ca")).Scan(&es, &ca); err != nil {
		t.Fatal(err)
	}
	if es == "" || ca == "" || es == ca {
		t.Errorf("translations es %q, ca %q: want two different ones", es, ca)
	}
	t.Logf("es: %s\nca: %s", es, ca)

	// status shows the children.
	out, stderr, code := s.dubctl(t, ctx, "status", parent.String())
	if code != 0 || !strings.Contains(out, "children") || !strings.Contains(out, wire.ChildTaskID(parent, "ca").String()) {
		t.Errorf("status of the parent (exit %d):\n%s\n%s", code, out, stderr)
	}

	s.checkPublishedLanguages(t, ctx, published)
	s.redeliverFanIn(t, ctx, parent)
}

// publishLanguages stores video once, under a key of its own choosing
// (not the default source.mp4), and publishes an extract_audio message
// naming two target_languages, as an integrator without dubctl would; it
// returns the task's id and the key.
func (s *stack) publishLanguages(t *testing.T, ctx context.Context, video string) blob.Ref {
	t.Helper()
	id := uuid.New()
	src := blob.Ref{Task: id, Key: "videos/" + id.String() + "/upload.mp4"}
	if _, err := s.bucket.Client.FPutObject(ctx, s.bucket.Name, src.Key, video,
		minio.PutObjectOptions{ContentType: "video/mp4"}); err != nil {
		t.Fatal(err)
	}
	env, err := wire.New(wire.StepExtractAudio, id, "trace-languages", wire.ExtractAudio{SourceVideoKey: src.Key,
		OutputAudioKey: wire.DefaultKeys(id).SourceAudio, SourceLanguage: "en", TargetLanguage: "es",
		TargetLanguages: []string{"es", "ca"}})
	if err != nil {
		t.Fatal(err)
	}
	body, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	publish(t, ctx, s, wire.RoutingKey(wire.StepExtractAudio), body)
	return src
}

// checkPublishedLanguages: the published task, with only its own video in
// storage, ends done with every child done, each child's video a copy of
// the parent's placed by the system.
func (s *stack) checkPublishedLanguages(t *testing.T, ctx context.Context, src blob.Ref) {
	t.Helper()
	parent := src.Task
	// extract_audio makes the row of a published task; it was published
	// before dubctl's, which is done by now.
	v, code := s.waitTask(t, ctx, parent, "", 8*time.Minute)
	if code != 0 || v.Status != task.Done {
		t.Fatalf("published task %s: exit %d, %s %q", parent, code, v.Status, v.Error)
	}
	want, err := s.bucket.Client.StatObject(ctx, s.bucket.Name, src.Key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := task.FamilyOf(ctx, s.db.Pool, parent)
	if err != nil || len(f.Children) != 2 {
		t.Fatalf("published task's children %+v (%v), want two", f.Children, err)
	}
	for _, c := range f.Children {
		if c.Status != task.Done {
			t.Errorf("published task's %s child: %s %q", c.TargetLanguage, c.Status, c.Error)
		}
		key := wire.DefaultKeys(c.ID).SourceVideo
		got, err := s.bucket.Client.StatObject(ctx, s.bucket.Name, key, minio.StatObjectOptions{})
		if err != nil || got.Size != want.Size || got.ETag != want.ETag {
			t.Errorf("%s child's video at %s: %d bytes, etag %s (%v); want the parent's copy, %d bytes, etag %s",
				c.TargetLanguage, key, got.Size, got.ETag, err, want.Size, want.ETag)
		}
		s.checkChildSteps(t, ctx, parent, c.ID)
	}
	t.Logf("published task %s: %d children done, videos copied from %s", parent, len(f.Children), src.Key)
}

// checkLanguageOutput: the video stream is the input's, the first audio
// track is the dub tagged with lang and not silent, the second the
// original, and the subtitles are muxed in.
func (s *stack) checkLanguageOutput(t *testing.T, ctx context.Context, input, output, lang string) {
	t.Helper()
	if got, want := videoMD5(t, ctx, output), videoMD5(t, ctx, input); got != want {
		t.Errorf("%s: video stream differs from the input", lang)
	}
	info, err := media.Probe(ctx, output)
	if err != nil {
		t.Fatalf("probe %s: %v", output, err)
	}
	audios := info.StreamsOf(media.AudioStream)
	want, err := media.ISO639(lang)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.StreamsOf(media.VideoStream)) != 1 || len(audios) != 2 {
		t.Fatalf("%s: %d video and %d audio streams, want 1 and 2", lang, len(info.StreamsOf(media.VideoStream)), len(audios))
	}
	if audios[0].Language != want || audios[1].Language != "eng" {
		t.Errorf("%s: audio tracks tagged %q and %q, want %q (the dub) and eng (the original)", lang,
			audios[0].Language, audios[1].Language, want)
	}
	if len(info.StreamsOf(media.SubtitleStream)) == 0 {
		t.Errorf("%s: no subtitle track", lang)
	}
	clip := filepath.Join(t.TempDir(), "dub.wav")
	if o, err := exec.CommandContext(ctx, "ffmpeg", "-nostdin", "-v", "error", "-i", output, "-map", "0:a:0",
		"-ac", "1", "-c:a", "pcm_s16le", clip).CombinedOutput(); err != nil {
		t.Fatalf("extract the %s dub: %v\n%s", lang, err, o)
	}
	vol, err := media.MeasureVolume(ctx, clip)
	if err != nil {
		t.Fatal(err)
	}
	if vol.MaxDB < -30 || vol.MeanDB < -45 {
		t.Errorf("%s dub is near silent: mean %.1f dB, peak %.1f dB", lang, vol.MeanDB, vol.MaxDB)
	}
	t.Logf("%s: %s, audio %s/%s, dub %.1f dB mean / %.1f dB peak", lang, output, audios[0].Language,
		audios[1].Language, vol.MeanDB, vol.MaxDB)
}

// stepRows counts id's attempts per step and the workers that made them.
func (s *stack) stepRows(t *testing.T, ctx context.Context, id uuid.UUID) (map[string]int, map[string]string) {
	t.Helper()
	rows, err := s.db.Pool.Query(ctx, `SELECT step, count(*), string_agg(DISTINCT worker, ',')
		FROM task_steps WHERE task_id = $1 GROUP BY step`, id)
	if err != nil {
		t.Fatal(err)
	}
	n, workers := map[string]int{}, map[string]string{}
	var step, worker string
	var c int
	if _, err := pgx.ForEachRow(rows, []any{&step, &c, &worker}, func() error {
		n[step], workers[step] = c, worker
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n, workers
}

// checkParentSteps: the parent extracted and transcribed, each part once
// and in one attempt, and ran nothing else.
func (s *stack) checkParentSteps(t *testing.T, ctx context.Context, parent uuid.UUID) {
	t.Helper()
	var extract, asr, asrParts, other int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE step = 'extract_audio'),
		count(*) FILTER (WHERE step = 'asr'), count(DISTINCT part) FILTER (WHERE step = 'asr'),
		count(*) FILTER (WHERE step NOT IN ('extract_audio', 'asr'))
		FROM task_steps WHERE task_id = $1`, parent).Scan(&extract, &asr, &asrParts, &other); err != nil {
		t.Fatal(err)
	}
	// chunk-00000.., the merge and the whole audio's message that cut it.
	if extract != 1 || asr != asrParts || asrParts < 3 || other != 0 {
		t.Errorf("parent attempts: extract_audio %d, asr %d over %d parts, other steps %d; want 1, one per part (≥ 3), 0",
			extract, asr, asrParts, other)
	}
}

// checkChildSteps: a child recorded extract_audio and asr as its parent's,
// ran translate (one attempt per part), tts and mux_video once each.
func (s *stack) checkChildSteps(t *testing.T, ctx context.Context, parent, child uuid.UUID) {
	t.Helper()
	n, workers := s.stepRows(t, ctx, child)
	inherited := task.InheritedWorker(parent)
	if n[wire.StepExtractAudio] != 1 || workers[wire.StepExtractAudio] != inherited || n[wire.StepASR] != 1 ||
		workers[wire.StepASR] != inherited {
		t.Errorf("child %s: extract_audio %d by %q, asr %d by %q; want one each, by %q", child, n[wire.StepExtractAudio],
			workers[wire.StepExtractAudio], n[wire.StepASR], workers[wire.StepASR], inherited)
	}
	var parts int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM step_parts WHERE task_id = $1 AND step = 'translate'`,
		child).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if parts == 0 || n[wire.StepTranslate] != parts || n[wire.StepTTS] != 1 || n[wire.StepMuxVideo] != 1 {
		t.Errorf("child %s: translate %d attempts over %d parts, tts %d, mux_video %d; want one each", child,
			n[wire.StepTranslate], parts, n[wire.StepTTS], n[wire.StepMuxVideo])
	}
}

// redeliverFanIn delivers the parent's asr merge (the fan-in) again as it
// was, then runs it again (its success taken back, then replayed): no child is
// spawned twice, no further translate message is emitted, nothing of the
// children runs again, and every task stays done.
func (s *stack) redeliverFanIn(t *testing.T, ctx context.Context, parent uuid.UUID) {
	t.Helper()
	var body []byte
	if err := s.db.Pool.QueryRow(ctx, `SELECT message FROM task_steps WHERE task_id = $1 AND step = 'asr'
		AND part = 'merge' AND status = 'succeeded'`, parent).Scan(&body); err != nil {
		t.Fatalf("the parent's merge message: %v", err)
	}
	env, err := wire.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var v string
		if err := s.db.Pool.QueryRow(ctx, `SELECT concat_ws(' | ',
			(SELECT count(*) FROM tasks WHERE parent_task_id = $1),
			(SELECT string_agg(status, ',' ORDER BY target_language) FROM tasks WHERE parent_task_id = $1 OR id = $1),
			(SELECT count(*) FROM step_parts p JOIN tasks c ON c.id = p.task_id WHERE c.parent_task_id = $1),
			(SELECT count(*) FROM task_steps s JOIN tasks c ON c.id = s.task_id WHERE c.parent_task_id = $1))`,
			parent).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := snapshot()
	publish(t, ctx, s, wire.QueueASR, body)
	// The claim skips a part that succeeded, so a replay alone would not
	// run the handler: its success is taken back first (as a restore of an
	// older backup could), so that the fan-in really runs again.
	if _, err := s.db.Pool.Exec(ctx, `UPDATE task_steps SET status = 'failed' WHERE task_id = $1 AND step = 'asr'
		AND part = 'merge'`, parent); err != nil {
		t.Fatal(err)
	}
	var replayed int
	err = pgx.BeginFunc(ctx, s.db.Pool, func(tx pgx.Tx) error {
		fresh, _, err := step.Replay(ctx, tx, env, "e2e: the fan-in again")
		if fresh != nil {
			replayed = fresh.Attempt
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The workers' outbox sweep publishes the replay.
	testenv.EventuallyWithin(t, 2*time.Minute, fmt.Sprintf("the replayed fan-in (attempt %d) to succeed", replayed), func() bool {
		var ok bool
		if err := s.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM task_steps WHERE task_id = $1 AND step = 'asr'
			AND part = 'merge' AND attempt = $2 AND status = 'succeeded')
			AND NOT EXISTS (SELECT 1 FROM outbox)`, parent, replayed).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	})
	var merges int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'asr' AND part = 'merge'`,
		parent).Scan(&merges); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(); after != before || merges != 2 {
		t.Errorf("after the fan-in was delivered again and replayed: %s (merge attempts %d), before %s (want the same, 2 merges)",
			after, merges, before)
	}
	t.Logf("children, statuses, child parts, child attempts: %s; merge attempts %d", before, merges)
}
