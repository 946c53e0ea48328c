package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
)

// exitReview is dubctl's exit code for a task waiting in review.
const exitReview = 5

// TestReviewedTaskFinishesWithTheEdits: a task submitted with a review of
// its transcript and of its translation stops in review after asr (no
// translate attempt); its first line is split and the source text of the
// first half edited, and approved; it stops
// again after translate (no tts attempt), the edited line translated from
// the edited text; another line's translation is edited and approved; the
// task ends done, its final lines carry both edits, each line has its
// speech, and the timeline shows the waits, the edits and the approvals.
func TestReviewedTaskFinishesWithTheEdits(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	video := filepath.Join(dir, "talk.mp4")
	if err := media.MakeSampleVideo(ctx, sampleText, video, media.SampleOptions{Lead: sampleLead}); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := s.dubctl(t, ctx, "submit", "--input", video, "--review", "transcript,translation",
		"--wait", "--json", "--timeout", "3m")
	v := decodeTask(t, stdout, stderr)
	if code != exitReview || v.Status != "review" {
		t.Fatalf("submit --review --wait: exit %d, %s: %s\n%s", code, v.Status, v.Error, stderr)
	}
	id := v.TaskID
	s.checkNoAttempts(t, ctx, id, "translate")
	lines := s.reviewLines(t, ctx, id)
	if len(lines) == 0 || len(strings.Fields(lines[0].Source)) < 4 {
		t.Fatalf("the transcript's first line has fewer than 4 words: %+v", lines)
	}
	const source, text = "Good morning my friends.", "Texto corregido por una persona."
	s.reviewEdit(t, ctx, id, "--line", "1", "--split-at", "4")
	s.reviewEdit(t, ctx, id, "--line", "1", "--source", source)
	s.approve(t, ctx, id, exitReview, "")
	s.checkNoAttempts(t, ctx, id, "tts")
	lines = s.reviewLines(t, ctx, id)
	if lines[0].Source != source || lines[0].Text == nil || !strings.Contains(strings.ToLower(*lines[0].Text), "amigos") {
		t.Fatalf("line 1 after translate: %+v, want %q translated", lines[0], source)
	}
	s.reviewEdit(t, ctx, id, "--line", "2", "--text", text)
	out := filepath.Join(dir, "dub.mp4")
	s.approve(t, ctx, id, 0, out)
	segs := s.segments(t, ctx, id)
	if len(segs) != len(lines) || len(segs) < 2 || segs[0].SourceText != source || *segs[1].Text != text {
		t.Fatalf("final lines %+v, want line 1's source %q and line 2's text %q", segs, source, text)
	}
	for _, seg := range segs {
		if !seg.Synthesized {
			t.Errorf("line %d has no speech: %+v", seg.N, seg)
		}
	}
	if d, want := duration(t, ctx, out), duration(t, ctx, video); d < want-time.Second || d > want+time.Second {
		t.Errorf("the dub lasts %s, the source %s", d, want)
	}
	s.checkReviewTimeline(t, ctx, id)
}

// reviewLines runs `dubctl review show --json`.
func (s *stack) reviewLines(t *testing.T, ctx context.Context, id uuid.UUID) []view.ReviewLine {
	t.Helper()
	stdout, stderr, code := s.dubctl(t, ctx, "review", "show", id.String(), "--json")
	var r view.TaskReview
	if err := json.Unmarshal([]byte(stdout), &r); code != 0 || err != nil {
		t.Fatalf("review show: exit %d (%v)\n%s\n%s", code, err, stdout, stderr)
	}
	return r.Lines
}

// reviewEdit runs `dubctl review edit` on the task.
func (s *stack) reviewEdit(t *testing.T, ctx context.Context, id uuid.UUID, args ...string) {
	t.Helper()
	if _, stderr, code := s.dubctl(t, ctx, append([]string{"review", "edit", id.String()}, args...)...); code != 0 {
		t.Fatalf("review edit %v: exit %d: %s", args, code, stderr)
	}
}

// approve runs `dubctl review approve --wait`, which must exit want (0:
// done, the dub saved at out; exitReview: in review again).
func (s *stack) approve(t *testing.T, ctx context.Context, id uuid.UUID, want int, out string) {
	t.Helper()
	args := []string{"review", "approve", id.String(), "--wait", "--json", "--timeout", "3m"}
	if out != "" {
		args = append(args, "--output", out)
	}
	stdout, stderr, code := s.dubctl(t, ctx, args...)
	if v := decodeTask(t, stdout, stderr); code != want {
		t.Fatalf("review approve --wait: exit %d, want %d: %s %s\n%s", code, want, v.Status, v.Error, stderr)
	}
}

// checkNoAttempts fails when the task has an attempt of step.
func (s *stack) checkNoAttempts(t *testing.T, ctx context.Context, id uuid.UUID, step string) {
	t.Helper()
	for k := range s.attempts(t, ctx, id) {
		if strings.HasPrefix(k, step+"/") {
			t.Fatalf("the task in review has a %s attempt: %s", step, k)
		}
	}
}

// checkReviewTimeline: the timeline shows two waits, the two edits with
// who made them, and two approvals, in order, before the end.
func (s *stack) checkReviewTimeline(t *testing.T, ctx context.Context, id uuid.UUID) {
	t.Helper()
	stdout, stderr, code := s.dubctl(t, ctx, "timeline", id.String(), "--json")
	var tl struct {
		Events []view.Event `json:"events"`
	}
	if err := json.Unmarshal([]byte(stdout), &tl); code != 0 || err != nil {
		t.Fatalf("timeline: exit %d (%v)\n%s", code, err, stderr)
	}
	var got []string
	for _, e := range tl.Events {
		if strings.HasPrefix(e.Kind, "review") {
			got = append(got, e.Kind+" "+e.Status)
			if e.Kind == view.EventReviewEdit && (e.Actor == "" || !strings.Contains(e.Detail, "→")) {
				t.Errorf("edit event without who or what: %+v", e)
			}
		}
	}
	want := "review transcript, review_edit split, review_edit edit, review_approved transcript, review translation, review_edit edit, review_approved translation"
	if strings.Join(got, ", ") != want {
		t.Errorf("the timeline's review events: %s\nwant %s", strings.Join(got, ", "), want)
	}
}

// TestReviewedLongRecording: a recording cut into chunks, its lines in
// batches of one. Reviewing the transcript and the translation: the chunks
// translate nothing while the transcript is reviewed and the merge holds
// the task; after the approval the batches (several finishing at once)
// hold it once more, the last of them. Reviewing the translation only: the
// batches run while chunks are still transcribed, and the task is held
// once, by the last of the batches and the merge, never before the
// transcription ends. After the last approval every line gets its speech
// and the task ends done.
func TestReviewedLongRecording(t *testing.T) {
	t.Parallel()
	for _, review := range []string{"transcript,translation", "translation"} {
		t.Run(review, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, map[string]string{"ASR_CHUNK_SECONDS": "5", "TRANSLATE_BATCH_SIZE": "1"})
			s.start(t, append(append([]string{}, workers...), helpers...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			s.reviewLong(t, ctx, review)
		})
	}
}

// reviewLong runs TestReviewedLongRecording with review.
func (s *stack) reviewLong(t *testing.T, ctx context.Context, review string) {
	stdout, stderr, code := s.dubctl(t, ctx, "submit", "--input", fixtureVideo(t, ctx, "jfk.wav", 0), "--review", review,
		"--wait", "--json", "--timeout", "4m")
	v := decodeTask(t, stdout, stderr)
	if code != exitReview || v.Status != "review" {
		t.Fatalf("submit --review --wait: exit %d, %s: %s\n%s", code, v.Status, v.Error, stderr)
	}
	id := v.TaskID
	attempts := s.attempts(t, ctx, id)
	if attempts["asr/chunk-00001/1"] != "succeeded" || attempts["asr/merge/1"] != "succeeded" {
		t.Fatalf("the recording was not cut into chunks, or waits before its merge: %v", attempts)
	}
	lines := s.reviewLines(t, ctx, id)
	if len(lines) < 2 {
		t.Fatalf("%d lines, want several", len(lines))
	}
	if review != "translation" {
		s.checkNoAttempts(t, ctx, id, "translate")
		s.approve(t, ctx, id, exitReview, "")
	}
	s.checkNoAttempts(t, ctx, id, "tts")
	for _, l := range s.reviewLines(t, ctx, id) {
		if l.Text == nil {
			t.Errorf("line %d waits in review of the translation without one: %+v", l.N, l)
		}
	}
	s.approve(t, ctx, id, 0, filepath.Join(t.TempDir(), "dub.mp4"))
	for _, seg := range s.segments(t, ctx, id) {
		if !seg.Synthesized || seg.Text == nil {
			t.Errorf("line %d: %+v", seg.N, seg)
		}
	}
	batches := 0
	for k, st := range s.attempts(t, ctx, id) {
		if strings.HasPrefix(k, "translate/r1/") && st == "succeeded" {
			batches++
		}
	}
	if batches != len(lines) {
		t.Errorf("%d translate batches of revision 1 succeeded, want one a line (%d)", batches, len(lines))
	}
}

// TestReviewedSubtitles: a task from a person's subtitles stops in review
// at once when it asks one — the transcript's for subtitles in the source
// language (no asr attempt, no translate before the approval), the
// translation's for subtitles in the target language — and ends done with
// the lines as approved.
func TestReviewedSubtitles(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	video := filepath.Join(dir, "talk.mp4")
	if err := media.MakeSampleVideo(ctx, sampleText, video, media.SampleOptions{Lead: sampleLead}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, lang, review, stage, text string }{
		{"en.srt", "", "transcript", "transcript", "Good morning everyone."},
		{"es.srt", ":es", "translation", "translation", "Buenos días a todos."},
	} {
		srt := filepath.Join(dir, c.file)
		body := "1\n00:00:00,500 --> 00:00:03,000\n" + c.text + "\n\n2\n00:00:03,200 --> 00:00:06,000\n" + c.text + "\n"
		if err := os.WriteFile(srt, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := s.dubctl(t, ctx, "submit", "--input", video, "--subtitles", srt+c.lang, "--review", c.review,
			"--wait", "--json", "--timeout", "3m")
		v := decodeTask(t, stdout, stderr)
		if code != exitReview || v.Status != "review" {
			t.Fatalf("%s: submit: exit %d, %s: %s\n%s", c.file, code, v.Status, v.Error, stderr)
		}
		s.checkNoAttempts(t, ctx, v.TaskID, "asr")
		s.checkNoAttempts(t, ctx, v.TaskID, "translate")
		s.reviewEdit(t, ctx, v.TaskID, "--line", "2", "--delete")
		s.approve(t, ctx, v.TaskID, 0, filepath.Join(dir, c.file+".mp4"))
		if segs := s.segments(t, ctx, v.TaskID); len(segs) != 1 || !segs[0].Synthesized {
			t.Errorf("%s: final lines %+v, want the one left, spoken", c.file, segs)
		}
	}
}
