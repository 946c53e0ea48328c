package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/task/tasktest"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
)

// reviewed makes, for each mode, a task waiting in review of its
// transcript with three lines.
func reviewed(t *testing.T, e *env) map[string]uuid.UUID {
	t.Helper()
	ids := map[string]uuid.UUID{}
	for _, mode := range modeNames {
		id := tasktest.InReview(t, context.Background(), e.db.Pool, task.StageTranscript)
		e.exec(t, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text) VALUES
			($1, 0, 0, 2000, 'hello to you all'), ($1, 1, 3000, 5000, 'good morning'), ($1, 2, 6000, 8000, 'goodbye')`, id)
		ids[mode] = id
	}
	return ids
}

// varying matches what two runs print differently besides ids and times:
// the edits' numbers, how long the task has waited.
var varying = regexp.MustCompile(`"id": \d+|"waitedSeconds": [0-9.e+-]+|waiting for \S+`)

// sameReview runs `dubctl args…` with each mode's task in place of ID and
// checks that both exit with want and print the same once the ids, times
// and the numbers that differ (varying) are set aside; it returns what
// database mode printed, so set aside.
func sameReview(t *testing.T, m *modes, ids map[string]uuid.UUID, want int, args ...string) (string, string) {
	t.Helper()
	var outs, errs []string
	for _, mode := range modeNames {
		a := []string{}
		for _, s := range args {
			a = append(a, strings.ReplaceAll(s, "ID", ids[mode].String()))
		}
		if mode == "database" {
			a = append(a, "--as", "admin")
		}
		m.use(t, mode)
		o, e, code := run(t, a...)
		if code != want {
			t.Fatalf("%s mode: dubctl %v: exit %d, want %d\n%s%s", mode, a, code, want, o, e)
		}
		o, e = strings.ReplaceAll(o, ids[mode].String(), "ID"), strings.ReplaceAll(e, ids[mode].String(), "ID")
		outs = append(outs, varying.ReplaceAllString(rfc3339.ReplaceAllString(o, "TIME"), "N"))
		errs = append(errs, e)
	}
	if outs[0] != outs[1] || errs[0] != errs[1] {
		t.Fatalf("dubctl %v: the modes differ\ndatabase mode:\n%s%s\nconsole mode:\n%s%s", args, outs[0], errs[0], outs[1], errs[1])
	}
	return outs[0], errs[0]
}

// TestReviewInBothModes: show, edit (a change, a split, a merge, a
// deletion), the refusals and the approval print the same in database mode
// and through the console, and write the same audit rows.
func TestReviewInBothModes(t *testing.T) {
	e := setup(t)
	m := &modes{e: e, console: startConsole(t, e)}
	ids := reviewed(t, e)
	missing := uuid.NewString()
	show := func(args ...string) string {
		out, _ := sameReview(t, m, ids, 0, args...)
		return out
	}
	if out := show("review", "show", "ID"); !strings.Contains(out, "review of the transcript") ||
		!strings.Contains(out, "0:03.000  0:05.000  -        good morning      (translated on approval)") {
		t.Errorf("review show printed\n%s", out)
	}
	if out := show("review", "edit", "ID", "--line", "2", "--source", "good evening", "--speaker", "Anna", "--json"); !strings.Contains(out,
		`"source": "good evening"`) || !strings.Contains(out, `"actor": "admin"`) {
		t.Errorf("review edit printed\n%s", out)
	}
	if out := show("review", "edit", "ID", "--line", "1", "--split-at", "3"); !strings.Contains(out,
		`line 1 split: 0.000s–2.000s "hello to you all" → 0.000s–1.000s "hello to" | 1.000s–2.000s "you all"`) {
		t.Errorf("review edit --split-at printed\n%s", out)
	}
	show("review", "edit", "ID", "--line", "3", "--merge")
	show("review", "edit", "ID", "--line", "3", "--delete")
	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{cli.ExitUsage, []string{"review", "edit", "ID", "--line", "9", "--source", "x"}, "line 9 of task ID: no such segment (it has 2 lines"},
		{cli.ExitUsage, []string{"review", "edit", "ID", "--line", "1", "--text", "a\u202eb"}, "U+202E"},
		{cli.ExitUsage, []string{"review", "edit", "ID", "--line", "1", "--end-ms", "9000"}, "overlaps line 2"},
		{cli.ExitUsage, []string{"review", "edit", "ID", "--line", "1", "--merge", "--delete"}, "give one change"},
		{cli.ExitFailed, []string{"review", "edit", missing, "--line", "1", "--delete"}, "task " + missing + ": no such task"},
		{cli.ExitFailed, []string{"review", "show", missing}, "task " + missing + ": no such task"},
	} {
		if _, stderr := sameReview(t, m, ids, c.code, c.args...); !strings.Contains(stderr, c.want) {
			t.Errorf("dubctl %v: %s; want %q", c.args, stderr, c.want)
		}
	}
	importExportInBothModes(t, m, ids)
	if out := show("review", "approve", "ID", "--json"); !strings.Contains(out, `"stage": "transcript"`) || !strings.Contains(out, `"lines": 3`) {
		t.Errorf("review approve printed\n%s", out)
	}
	if _, stderr := sameReview(t, m, ids, cli.ExitFailed, "review", "approve", "ID"); !strings.Contains(stderr,
		"review task ID: it is running: the task is not in review") {
		t.Errorf("a second approval: %s", stderr)
	}
	sameAuditRows(t, e)
}

// TestSubmitWithReview: --review reaches the task's row and its first
// message in database mode (console mode posts it as the form's review
// field: the console's tests).
func TestSubmitWithReview(t *testing.T) {
	e := setup(t)
	out, stderr, code := run(t, "submit", "--input", sample(t, media.SampleSpeech), "--review", "translation,transcript")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	var p wire.ExtractAudio
	if err := json.Unmarshal(e.submitted(t).Payload, &p); err != nil || strings.Join(p.Review, ",") != "transcript,translation" {
		t.Fatalf("first message's review %v (%v)", p.Review, err)
	}
	var review []string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT review FROM tasks WHERE id = $1`, strings.TrimSpace(out)).
		Scan(&review); err != nil || strings.Join(review, ",") != "transcript,translation" {
		t.Fatalf("task row's review %v (%v)", review, err)
	}
}

// importExportInBothModes: export writes the same file in both modes; an
// edited file comes back the same way; refusals (a cue past the next one,
// a file that is not UTF-8) read the same.
func importExportInBothModes(t *testing.T, m *modes, ids map[string]uuid.UUID) {
	t.Helper()
	vtt, _ := sameReview(t, m, ids, 0, "review", "export", "ID", "--format", "vtt")
	if !strings.HasPrefix(vtt, "WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.000\nhello to\n") {
		t.Fatalf("review export printed\n%s", vtt)
	}
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	edited := file("edited.vtt", strings.Replace(vtt, "you all", "you all, friends", 1)+"\n00:00:06.000 --> 00:00:07.000\nsee you\n")
	if out, _ := sameReview(t, m, ids, 0, "review", "import", "ID", "--file", edited); !strings.Contains(out, "2 lines → 3 lines") ||
		!strings.Contains(out, "you all, friends") {
		t.Errorf("review import printed\n%s", out)
	}
	for _, c := range []struct{ content, want string }{
		{"1\n00:00:01,000 --> 00:00:02,000\nhi\n\n2\n00:00:01,500 --> 00:00:03,000\nho\n", "line 6: "},
		{"1\n00:00:01,000 --> 00:00:02,000\ncaf\xe9\n", "line 3: "},
	} {
		if _, stderr := sameReview(t, m, ids, cli.ExitUsage, "review", "import", "ID", "--file", file("bad.srt", c.content)); !strings.Contains(stderr, c.want) {
			t.Errorf("import of %q: %s; want %q", c.content, stderr, c.want)
		}
	}
}
