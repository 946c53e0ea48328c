package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
)

// jfkCues are the true transcript of jfk.wav (jfk.txt) cut at its pauses,
// timed where each phrase is spoken (its voiced frames, measured once
// with ffmpeg's silencedetect and pocketsphinx's word times).
var jfkCues = []subtitle.Cue{
	{StartMS: 320, EndMS: 2300, Text: "And so my fellow Americans,"},
	{StartMS: 3280, EndMS: 4430, Text: "ask not"},
	{StartMS: 5350, EndMS: 7700, Text: "what your country can do for you,"},
	{StartMS: 8160, EndMS: 10500, Text: "ask what you can do for your country."},
}

// jfkSpanish are the same lines in Spanish, with the same timing.
var jfkSpanish = []string{
	"Y así, mis compatriotas americanos,",
	"no preguntéis",
	"qué puede hacer vuestro país por vosotros,",
	"preguntad qué podéis hacer vosotros por vuestro país.",
}

// jfkClip makes an 11 s video of jfk.wav over a test picture.
func jfkClip(t *testing.T, ctx context.Context) string {
	t.Helper()
	video := filepath.Join(t.TempDir(), "jfk.mp4")
	cmd := exec.CommandContext(ctx, "ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10",
		"-i", fixture(t, "jfk.wav"), "-map", "0:v", "-map", "1:a", "-shortest", "-c:v", "libx264", "-preset", "veryfast",
		"-pix_fmt", "yuv420p", "-c:a", "aac", video)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make the clip: %v\n%s", err, out)
	}
	return video
}

// writeSubtitles writes cues as a file of format f and returns its path.
func writeSubtitles(t testing.TB, name string, f subtitle.Format, cues []subtitle.Cue) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := subtitle.Write(out, f, cues); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSubtitlesIn dubs the jfk clip from its true transcript instead of
// recognising it (issue 49's done-when): an English SRT makes no asr
// attempt and the Spanish lines are the translation of the given text; a
// Spanish WebVTT (with the English SRT as its source text) makes no asr and
// no translate attempt and speaks the given lines. Either way each dubbed
// line starts within 50 ms of its cue, the timeline says why the steps were
// skipped, and the outputs carry WebVTT beside SRT (and, asked for, the dub
// with its subtitles burned in).
func TestSubtitlesIn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// target: the subtitles are in the target language.
		target bool
	}{{"source language", false}, {"target language", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			subtitlesIn(t, c.target)
		})
	}
}

func subtitlesIn(t *testing.T, target bool) {
	s := newStack(t, nil)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	video := jfkClip(t, ctx)
	english := writeSubtitles(t, "jfk.en.srt", subtitle.SRT, jfkCues)
	want := make([]string, len(jfkCues))
	args := []string{"submit", "--input", video, "--source", "en", "--target", "es", "--wait", "--json", "--timeout", "4m",
		"--output", filepath.Join(t.TempDir(), "jfk.es.mp4")}
	if target {
		spanish := make([]subtitle.Cue, len(jfkCues))
		for i, cue := range jfkCues {
			spanish[i], want[i] = cue, jfkSpanish[i]
			spanish[i].Text = jfkSpanish[i]
		}
		args = append(args, "--subtitles", writeSubtitles(t, "jfk.es.vtt", subtitle.WebVTT, spanish)+":es",
			"--source-subtitles", english, "--burn-subtitles", "bilingual")
	} else {
		texts := make([]string, len(jfkCues))
		for i, cue := range jfkCues {
			texts[i] = cue.Text
		}
		tr, err := speech.NewApertium().Translate(ctx, texts, "en", "es")
		if err != nil {
			t.Fatal(err)
		}
		copy(want, tr)
		args = append(args, "--subtitles", english)
	}
	stdout, stderr, code := s.dubctl(t, ctx, args...)
	v := decodeTask(t, stdout, stderr)
	if code != 0 || v.Status != "done" {
		t.Fatalf("submit: exit %d, %s: %s\n%s", code, v.Status, v.Error, stderr)
	}
	s.checkSkipped(t, ctx, v.TaskID, target)
	segs := s.segments(t, ctx, v.TaskID)
	if len(segs) != len(jfkCues) {
		t.Fatalf("%d segments, want the %d cues", len(segs), len(jfkCues))
	}
	for i, sg := range segs {
		cue := jfkCues[i]
		t.Logf("%5d-%5d ms %q → %q", sg.StartMS, sg.EndMS, sg.SourceText, *sg.Text)
		if sg.StartMS != cue.StartMS || sg.EndMS != cue.EndMS || sg.SourceText != cue.Text || sg.Text == nil || *sg.Text != strings.TrimSpace(want[i]) {
			t.Errorf("segment %d %+v: want %d-%d ms %q → %q", i+1, sg, cue.StartMS, cue.EndMS, cue.Text, want[i])
		}
	}
	s.checkStarts(t, ctx, v.TaskID)
	s.checkOutputs(t, ctx, v, target)
	if target {
		s.checkRedubBurns(t, ctx, v.TaskID)
	}
}

// checkRedubBurns: a redub of a task that asked for burned-in subtitles
// renders them again, into the new version's own final.burned.mp4, which
// its versions list.
func (s *stack) checkRedubBurns(t *testing.T, ctx context.Context, id uuid.UUID) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "v2.mp4")
	stdout, stderr, code := s.dubctl(t, ctx, "redub", id.String(), "--segment", "2", "--text", "no preguntes",
		"--wait", "--json", "--timeout", "3m", "--output", out)
	if v2 := decodeTask(t, stdout, stderr); code != 0 || v2.Status != "done" {
		t.Fatalf("redub: exit %d, %+v\n%s", code, v2, stderr)
	}
	stdout, stderr, code = s.dubctl(t, ctx, "versions", id.String(), "--json")
	var versions []view.Version
	if err := json.Unmarshal([]byte(stdout), &versions); code != 0 || err != nil || len(versions) != 2 {
		t.Fatalf("versions: exit %d, %v: %s\n%s", code, err, stdout, stderr)
	}
	want := "outputs/" + id.String() + "/v2/final.burned.mp4"
	if versions[1].BurnedVideoKey != want {
		t.Fatalf("version 2 %+v: want its burned dub %s", versions[1], want)
	}
	if _, err := s.bucket.Client.StatObject(ctx, s.bucket.Name, want, minio.StatObjectOptions{}); err != nil {
		t.Errorf("version 2's burned dub: %v", err)
	}
	if _, err := os.Stat(strings.TrimSuffix(out, ".mp4") + ".burned.mp4"); err != nil {
		t.Errorf("redub --wait saved no burned dub: %v", err)
	}
}

// checkSkipped: the task made no asr attempt (and, from subtitles in the
// target language, no translate attempt); its steps and timeline say the
// plan skipped them.
func (s *stack) checkSkipped(t *testing.T, ctx context.Context, id uuid.UUID, target bool) {
	t.Helper()
	skipped := map[string]bool{"asr": true, "translate": target}
	steps := []string{"asr"}
	if target {
		steps = append(steps, "translate")
	}
	var n int
	if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = ANY($2)`,
		id, steps).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d attempts of %v (%v), want none", n, steps, err)
	}
	stdout, stderr, code := s.dubctl(t, ctx, "status", id.String(), "--json")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	v := decodeTask(t, stdout, stderr)
	for _, st := range v.Steps {
		if (st.Status == view.Skipped) != skipped[st.Step] || skipped[st.Step] && st.Attempts != 0 {
			t.Errorf("step %s: %s with %d attempts", st.Step, st.Status, st.Attempts)
		}
	}
	stdout, stderr, code = s.dubctl(t, ctx, "timeline", id.String(), "--json")
	var timeline struct {
		Events []view.Event `json:"events"`
	}
	if err := json.Unmarshal([]byte(stdout), &timeline); code != 0 || err != nil {
		t.Fatalf("timeline: exit %d (%v)\n%s", code, err, stderr)
	}
	n = 0
	for _, e := range timeline.Events {
		if e.Kind == view.EventSkipped {
			n++
			t.Logf("timeline: %s skipped: %s", e.Step, e.Detail)
		}
	}
	if want := map[bool]int{false: 1, true: 2}[target]; n != want {
		t.Errorf("%d skipped events in the timeline, want %d", n, want)
	}
}

// checkStarts: each dubbed line starts within 50 ms of its cue, by the
// task's timing report (the slot's start plus the measured drift of the
// speech in the clip).
func (s *stack) checkStarts(t *testing.T, ctx context.Context, id uuid.UUID) {
	t.Helper()
	var report media.TimingReport
	if err := json.Unmarshal(s.object(t, ctx, "outputs/"+id.String()+"/timing.json"), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Segments) != len(jfkCues) {
		t.Fatalf("timing report of %d segments, want %d", len(report.Segments), len(jfkCues))
	}
	for i, p := range report.Segments {
		start := p.StartMS + p.StartDriftMS
		t.Logf("line %d: cue at %d ms, dubbed speech at %d ms", i+1, jfkCues[i].StartMS, start)
		if d := start - jfkCues[i].StartMS; d > 50 || d < -50 {
			t.Errorf("line %d starts at %d ms, %d ms from its cue (%d ms)", i+1, start, d, jfkCues[i].StartMS)
		}
	}
}

// checkOutputs: dubctl saved the WebVTT files beside the SRT ones, and the
// dub with its subtitles burned in when the task asked for it.
func (s *stack) checkOutputs(t *testing.T, ctx context.Context, v taskJSON, burned bool) {
	t.Helper()
	var vtt int
	for _, p := range v.SubtitlePaths {
		if strings.HasSuffix(p, ".vtt") {
			vtt++
		}
	}
	if vtt != 3 || len(v.SubtitlePaths) != 6 {
		t.Errorf("subtitles saved %v: want source, target and bilingual, SRT and WebVTT", v.SubtitlePaths)
	}
	path := strings.TrimSuffix(v.OutputPath, ".mp4") + ".burned.mp4"
	info, err := media.Probe(ctx, path)
	switch {
	case burned && (err != nil || len(info.StreamsOf(media.VideoStream)) != 1):
		t.Errorf("burned dub %s: %+v, %v", path, info, err)
	case !burned && err == nil:
		t.Errorf("a burned dub was saved though none was asked for")
	}
}
