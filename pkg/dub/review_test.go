package dub_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/task/tasktest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// reviewTask makes a task waiting in review at stage with three lines
// (numbered 0, 5 and 9, as asr's chunks may number them), each translated
// when the stage is translation; the video lasts 10 s.
func reviewTask(t *testing.T, ctx context.Context, pool *pgxpool.Pool, stage string, also ...string) uuid.UUID {
	t.Helper()
	id := tasktest.InReview(t, ctx, pool, stage, also...)
	for i, idx := range []int{0, 5, 9} {
		var mt *string
		if stage == task.StageTranslation {
			s := []string{"hola a todos", "buenos días", "adiós"}[i]
			mt = &s
		}
		if _, err := pool.Exec(ctx, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, pitch_hz)
			VALUES ($1, $2, $3, $4, $5, $6, 120)`, id, idx, i*3000, i*3000+2000,
			[]string{"hello to you all", "good morning", "goodbye"}[i], mt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE tasks SET source_probe = '{"info": {"duration": 10000000000}}' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

func ptr[T any](v T) *T { return &v }

// lines reads the task's lines as the review shows them.
func lines(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) []view.ReviewLine {
	t.Helper()
	ls, err := view.ReviewLines(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// TestReviewEditALine: a line's source, translation, times and speaker
// change; a new source clears the translation (made on approval); the
// edit is recorded with who, the line, before and after.
func TestReviewEditALine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	id := reviewTask(t, ctx, pool, task.StageTranslation)

	ed, err := dub.EditLine(ctx, pool, id, "ana", 2, dub.Change{Source: ptr(" good evening "), StartMS: ptr(3100),
		EndMS: ptr(5900), Speaker: ptr("Anna")})
	if err != nil {
		t.Fatal(err)
	}
	got := lines(t, ctx, pool, id)[1]
	want := view.ReviewLine{N: 2, StartMS: 3100, EndMS: 5900, Speaker: "Anna", Source: "good evening"}
	if got != want || ed.Lines[1] != want {
		t.Fatalf("line 2 = %+v (answered %+v), want %+v", got, ed.Lines[1], want)
	}
	e := ed.Edit
	if e.Actor != "ana" || e.Action != dub.ActionEdit || *e.Line != 2 || e.Stage != task.StageTranslation ||
		e.Before[0].Source != "good morning" || *e.Before[0].Text != "buenos días" || e.After[0] != want {
		t.Fatalf("edit recorded %+v", e)
	}
	if _, err := dub.EditLine(ctx, pool, id, "ana", 3, dub.Change{Text: ptr("hasta luego")}); err != nil {
		t.Fatal(err)
	}
	if l := lines(t, ctx, pool, id)[2]; l.Source != "goodbye" || *l.Text != "hasta luego" {
		t.Fatalf("line 3 after a new translation: %+v", l)
	}
	r, err := view.ReviewOf(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != task.Review || r.Stage != task.StageTranslation || r.Since == nil || *r.WaitedSeconds < 0 ||
		len(r.Edits) != 2 || r.Edits[1].After[0].N != 3 || r.DurationMS != 10000 {
		t.Fatalf("review: %+v", r)
	}
	var voice string
	if err := pool.QueryRow(ctx, `SELECT voice FROM segments WHERE task_id = $1 AND idx = 5`, id).Scan(&voice); err != nil || voice != "" {
		t.Fatalf("the speaker changed, the voice is %q (%v); want it chosen again", voice, err)
	}
}

// TestReviewRefusals: what an edit refuses, with its error, and nothing
// written.
func TestReviewRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	id := reviewTask(t, ctx, pool, task.StageTranscript)
	for _, c := range []struct {
		n      int
		change dub.Change
		want   error
		text   string
	}{
		{0, dub.Change{Source: ptr("x")}, dub.ErrNoSegment, "numbered from 1"},
		{4, dub.Change{Source: ptr("x")}, dub.ErrNoSegment, "it has 3 lines"},
		{1, dub.Change{}, dub.ErrInvalidLine, "nothing to change"},
		{1, dub.Change{Source: ptr("  ")}, dub.ErrInvalidText, "delete the line instead"},
		{1, dub.Change{Source: ptr("a\x1bb")}, dub.ErrInvalidText, "U+001B"},
		{1, dub.Change{Text: ptr(strings.Repeat("x", dub.MaxTextLength+1))}, dub.ErrInvalidText, "at most 2000"},
		{2, dub.Change{StartMS: ptr(1500)}, dub.ErrInvalidLine, "overlaps line 1, which ends at 2000 ms"},
		{2, dub.Change{EndMS: ptr(6100)}, dub.ErrInvalidLine, "overlaps line 3, which starts at 6000 ms"},
		{2, dub.Change{EndMS: ptr(2500)}, dub.ErrInvalidLine, "want 0 ≤ start < end"},
		{3, dub.Change{EndMS: ptr(10001)}, dub.ErrInvalidLine, "past the video's end (10000 ms)"},
		{1, dub.Change{Speaker: ptr(strings.Repeat("s", 65))}, dub.ErrInvalidLine, "at most 64"},
	} {
		_, err := dub.EditLine(ctx, pool, id, "ana", c.n, c.change)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("edit %d %+v: %v; want %v saying %q", c.n, c.change, err, c.want, c.text)
		}
	}
	if _, err := dub.SplitLine(ctx, pool, id, "ana", 2, 1); !errors.Is(err, dub.ErrInvalidLine) {
		t.Errorf("split before the first word: %v", err)
	}
	if _, err := dub.MergeLines(ctx, pool, id, "ana", 3); !errors.Is(err, dub.ErrInvalidLine) {
		t.Errorf("merge of the last line: %v", err)
	}
	if edits, _ := view.ReviewEdits(ctx, pool, id); len(edits) != 0 {
		t.Errorf("refused edits were recorded: %+v", edits)
	}
	running := tasktest.Done(t, ctx, pool, "trace-done")
	for name, err := range map[string]error{
		"edit of a done task":     errOf(dub.EditLine(ctx, pool, running, "ana", 1, dub.Change{Source: ptr("x")})),
		"approval of a done task": errOf(dub.Approve(ctx, pool, running, "ana", 0)),
		"delete of a done task":   errOf(dub.DeleteLine(ctx, pool, running, "ana", 1)),
	} {
		if !errors.Is(err, dub.ErrNotInReview) || !strings.Contains(err.Error(), "it is done") {
			t.Errorf("%s: %v, want ErrNotInReview naming the status", name, err)
		}
	}
	if _, err := dub.SplitLine(ctx, pool, uuid.New(), "ana", 1, 2); !errors.Is(err, dub.ErrNotFound) {
		t.Errorf("split of a missing task: %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }

// TestReviewSplitMergeDelete: a split shares the time in proportion to the
// text, a merge joins two lines, a deletion removes one; the lines are
// numbered again and every edit is recorded in order.
func TestReviewSplitMergeDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	id := reviewTask(t, ctx, pool, task.StageTranslation)

	if _, err := dub.SplitLine(ctx, pool, id, "ana", 1, 3); err != nil { // "hello to" | "you all"
		t.Fatal(err)
	}
	ls := lines(t, ctx, pool, id)
	if len(ls) != 4 || ls[0].Source != "hello to" || ls[1].Source != "you all" || ls[0].Text != nil ||
		ls[1].Text != nil || ls[0].EndMS != 1000 || ls[1].StartMS != 1000 || ls[1].EndMS != 2000 || ls[2].Source != "good morning" {
		t.Fatalf("after the split: %+v", ls)
	}
	if _, err := dub.MergeLines(ctx, pool, id, "ben", 3); err != nil { // "good morning" + "goodbye"
		t.Fatal(err)
	}
	ls = lines(t, ctx, pool, id)
	if len(ls) != 3 || ls[2].Source != "good morning goodbye" || *ls[2].Text != "buenos días adiós" ||
		ls[2].StartMS != 3000 || ls[2].EndMS != 8000 {
		t.Fatalf("after the merge: %+v", ls)
	}
	if _, err := dub.DeleteLine(ctx, pool, id, "cy", 1); err != nil {
		t.Fatal(err)
	}
	ls = lines(t, ctx, pool, id)
	if len(ls) != 2 || ls[0].N != 1 || ls[0].Source != "you all" {
		t.Fatalf("after the delete: %+v", ls)
	}
	var idx []int32
	if err := pool.QueryRow(ctx, `SELECT array_agg(idx ORDER BY idx) FROM segments WHERE task_id = $1`, id).Scan(&idx); err != nil ||
		len(idx) != 2 || idx[0] != 0 || idx[1] != 1 {
		t.Fatalf("segments numbered %v (%v), want 0, 1", idx, err)
	}
	edits, err := view.ReviewEdits(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range edits {
		got = append(got, e.Actor+" "+e.Action+" "+string(rune('0'+*e.Line))+" "+
			string(rune('0'+len(e.Before)))+"→"+string(rune('0'+len(e.After))))
	}
	if strings.Join(got, "; ") != "ana split 1 1→2; ben merge 3 2→1; cy delete 1 1→0" {
		t.Fatalf("edits: %v", got)
	}
}

// TestApproveSendsTheChainOn: an approval sets the task running and adds,
// in the same transaction, one translate message per batch of its lines,
// each a registered part of translate — revision 0 after the transcript,
// revision 1 (parts of their own) after the translation.
func TestApproveSendsTheChainOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	for _, c := range []struct {
		stage    string
		revision int
		parts    []string
	}{
		{task.StageTranscript, 0, []string{"seg-0,seg-1", "seg-2"}},
		{task.StageTranslation, 1, []string{"r1/seg-0,seg-1", "r1/seg-2"}},
	} {
		id := reviewTask(t, ctx, pool, c.stage)
		if _, err := dub.DeleteLine(ctx, pool, id, "ana", 3); err != nil {
			t.Fatal(err)
		}
		if _, err := dub.EditLine(ctx, pool, id, "ana", 1, dub.Change{Source: ptr("hi all")}); err != nil {
			t.Fatal(err)
		}
		if _, err := dub.SplitLine(ctx, pool, id, "ana", 2, 2); err != nil {
			t.Fatal(err)
		}
		a, err := dub.Approve(ctx, pool, id, "ana", 2)
		if err != nil {
			t.Fatal(err)
		}
		if a.Stage != c.stage || a.Lines != 3 || a.Batches != 2 || len(a.Outbox) != 3 || a.Edit.Action != dub.ActionApprove {
			t.Fatalf("%s: approved %+v", c.stage, a)
		}
		checkApproved(t, ctx, pool, id, c.revision, c.parts)
		if _, err := dub.Approve(ctx, pool, id, "ana", 2); !errors.Is(err, dub.ErrNotInReview) {
			t.Fatalf("%s: a second approval: %v", c.stage, err)
		}
	}
	id := reviewTask(t, ctx, pool, task.StageTranscript)
	for range 3 {
		if _, err := dub.DeleteLine(ctx, pool, id, "ana", 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dub.Approve(ctx, pool, id, "ana", 0); !errors.Is(err, dub.ErrNoLines) {
		t.Fatalf("approval without lines: %v", err)
	}
}

// checkApproved checks an approved task: running, its task.approved event
// and translate messages in the outbox, their parts registered, the
// approval recorded with when the task began to wait.
func checkApproved(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id uuid.UUID, revision int, parts []string) {
	t.Helper()
	var status string
	var registered []string
	if err := pool.QueryRow(ctx, `SELECT status, (SELECT array_agg(part ORDER BY part) FROM step_parts
		WHERE task_id = $1 AND step = 'translate') FROM tasks WHERE id = $1`, id).Scan(&status, &registered); err != nil {
		t.Fatal(err)
	}
	if status != task.Running || strings.Join(registered, " ") != strings.Join(parts, " ") {
		t.Fatalf("after the approval: %s, parts %v; want running, %v", status, registered, parts)
	}
	rows, err := pool.Query(ctx, `SELECT routing_key, body FROM outbox WHERE routing_key IN ('task.translate', 'event.task.approved') ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sent []string
	for rows.Next() {
		var key string
		var body []byte
		if err := rows.Scan(&key, &body); err != nil {
			t.Fatal(err)
		}
		if key == "event.task.approved" {
			if e, err := wire.DecodeEvent(body); err == nil && e.TaskID == id {
				sent = append(sent, "approved "+string(e.Data))
			}
			continue
		}
		env, err := wire.Decode(body)
		if err != nil || env.TaskID != id {
			continue
		}
		var p wire.Translate
		_ = json.Unmarshal(env.Payload, &p)
		if p.Revision != revision {
			t.Errorf("translate message of revision %d, want %d", p.Revision, revision)
		}
		sent = append(sent, p.Part())
	}
	if len(sent) != 1+len(parts) || !strings.HasPrefix(sent[0], "approved {\"stage\"") {
		t.Fatalf("outbox: %v", sent)
	}
	edits, _ := view.ReviewEdits(ctx, pool, id)
	last := edits[len(edits)-1]
	if last.Action != dub.ActionApprove || last.Line != nil || time.Since(last.At) > time.Minute {
		t.Fatalf("approval recorded as %+v", last)
	}
}

// TestReviewInTheTimeline: the task's timeline shows when it began to wait
// in review, each edit with who made it and the line before and after, and
// the approval.
func TestReviewInTheTimeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	id := reviewTask(t, ctx, pool, task.StageTranscript)
	if _, err := dub.EditLine(ctx, pool, id, "ana", 2, dub.Change{Source: ptr("good evening")}); err != nil {
		t.Fatal(err)
	}
	if _, err := dub.DeleteLine(ctx, pool, id, "ben", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := dub.Approve(ctx, pool, id, "cy", 0); err != nil {
		t.Fatal(err)
	}
	evs, err := view.Timeline(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "review") {
			got = append(got, strings.Join([]string{e.Kind, e.Status, e.Actor, e.Ref, e.Detail}, " / "))
		}
	}
	want := []string{
		"review / transcript /  /  / ",
		`review_edit / edit / ana / 2 / line 2: 3.000s–5.000s "good morning" → 3.000s–5.000s "good evening"`,
		`review_edit / delete / ben / 3 / line 3 deleted: 6.000s–8.000s "goodbye"`,
		"review_approved / transcript / cy /  / waited 0 s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("review events of the timeline:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReviewExportAndImport: the lines go out as SRT and WebVTT and come
// back edited (times, text, a speaker, a line more) as one recorded edit; a
// translation comes back line for line; what the subtitle reader refuses
// is refused with the file's line, and nothing changes.
func TestReviewExportAndImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	id := reviewTask(t, ctx, pool, task.StageTranslation)
	srt, err := dub.ExportLines(ctx, pool, id, subtitle.SRT, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := "1\n00:00:00,000 --> 00:00:02,000\nhola a todos\n\n2\n00:00:03,000 --> 00:00:05,000\nbuenos días\n"; !strings.HasPrefix(string(srt), want) {
		t.Fatalf("export of the translation:\n%s\nwant it to start\n%s", srt, want)
	}
	vtt, err := dub.ExportLines(ctx, pool, id, subtitle.WebVTT, dub.TextSource)
	if err != nil || !strings.HasPrefix(string(vtt), "WEBVTT\n\n1\n00:00:00.000 --> 00:00:02.000\nhello to you all\n") {
		t.Fatalf("export of the source as WebVTT (%v):\n%s", err, vtt)
	}
	edited := strings.Replace(string(vtt), "good morning", "<v Anna>good evening", 1) +
		"\n00:00:08.500 --> 00:00:09.500\nsee you\n"
	ed, err := dub.ImportLines(ctx, pool, id, "ana", dub.TextSource, []byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(t, ctx, pool, id)
	if len(ls) != 4 || ls[1].Source != "good evening" || ls[1].Speaker != "Anna" || ls[1].Text != nil ||
		ls[3].Source != "see you" || ls[3].StartMS != 8500 || ed.Edit.Action != dub.ActionImport || len(ed.Edit.Before) != 3 ||
		len(ed.Edit.After) != 4 {
		t.Fatalf("after the import: %+v (edit %+v)", ls, ed.Edit)
	}
	for _, c := range []struct{ file, want string }{
		{"1\n00:00:01,000 --> 00:00:12,000\nhi\n", "line 2: the cue ends at 00:00:12,000, past the end of the video"},
		{"", "no cues: the file is empty"},
		{"1\n00:00:01,000 --> 00:00:02,000\nhi\n", "translations are imported line for line"},
	} {
		text := dub.TextSource
		if strings.Contains(c.want, "line for line") {
			text = dub.TextTarget
		}
		if _, err := dub.ImportLines(ctx, pool, id, "ana", text, []byte(c.file)); !errors.Is(err, dub.ErrInvalidLine) ||
			!strings.Contains(err.Error(), c.want) {
			t.Errorf("import of %q: %v, want %q", c.file, err, c.want)
		}
	}
	if _, err := dub.ExportLines(ctx, pool, id, subtitle.SRT, dub.TextTarget); !errors.Is(err, dub.ErrNoTranslation) {
		t.Fatalf("export of missing translations: %v", err)
	}
	target := "1\n00:00:00,000 --> 00:00:02,000\nhola\n\n2\n00:00:03,000 --> 00:00:05,000\nbuenas tardes\n\n" +
		"3\n00:00:06,000 --> 00:00:08,000\nadiós\n\n4\n00:00:08,500 --> 00:00:09,600\nhasta luego\n"
	if _, err := dub.ImportLines(ctx, pool, id, "ana", dub.TextTarget, []byte(target)); err != nil {
		t.Fatal(err)
	}
	ls = lines(t, ctx, pool, id)
	if ls[1].Source != "good evening" || *ls[1].Text != "buenas tardes" || ls[3].EndMS != 9600 || ls[1].Speaker != "" {
		t.Fatalf("after the translation's import: %+v", ls)
	}
}
