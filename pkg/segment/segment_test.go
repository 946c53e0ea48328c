package segment_test

import (
	"context"
	"slices"
	"testing"

	"github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/task/tasktest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestStagedStatements: the operations a worker stages cost what their
// SQL cost before it moved here — a transcription one statement (two with
// lines), subtitles two, a translation and a failure one each.
func TestStagedStatements(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	rows := []segment.Row{{StartMS: 0, EndMS: 900, Source: "hello"}, {StartMS: 1000, EndMS: 1900, Source: "world"}}
	for _, c := range []struct {
		name string
		got  []segment.Statement
		want int
	}{
		{"transcribed", segment.Transcribed(id, 0, -1, rows), 2},
		{"transcribed range", segment.Transcribed(id, 4, 9, rows), 2},
		{"transcribed nothing", segment.Transcribed(id, 4, -1, nil), 1},
		{"subtitled", segment.Subtitled(id, rows), 2},
		{"subtitled nothing", segment.Subtitled(id, nil), 2},
		{"translated", []segment.Statement{segment.Translated(id, []int32{0}, []string{"hola"})}, 1},
		{"failed", []segment.Statement{segment.SynthesisFailed(id, 0, "boom")}, 1},
	} {
		if len(c.got) != c.want {
			t.Errorf("%s: %d statements, want %d", c.name, len(c.got), c.want)
		}
		for _, s := range c.got {
			if s.SQL == "" || len(s.Args) == 0 || s.Args[0] != id {
				t.Errorf("%s: statement %q with %v: want the task id first", c.name, s.SQL, s.Args)
			}
		}
	}
	// The range's stale lines go from past the new lines, up to its end.
	if got := segment.Transcribed(id, 4, 9, rows)[0].Args; !slices.Equal(got, []any{id, 6, 9}) {
		t.Errorf("transcribed range deletes %v, want [%s 6 9]", got, id)
	}
}

// line is a segment's row as the tests read it.
type line struct {
	idx            int
	start, end     int
	src            string
	mt             *string
	speaker, voice string
	audio          *string
	ttsError       string
	failures       int
}

// lines reads task id's lines.
func lines(t *testing.T, ctx context.Context, q *pgxpool.Pool, id uuid.UUID) []line {
	t.Helper()
	rows, err := q.Query(ctx, `SELECT idx, start_ms, end_ms, src_text, mt_text, speaker, voice, tts_audio_key,
		tts_error, tts_failures FROM segments WHERE task_id = $1 ORDER BY idx`, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (line, error) {
		var l line
		return l, r.Scan(&l.idx, &l.start, &l.end, &l.src, &l.mt, &l.speaker, &l.voice, &l.audio, &l.ttsError, &l.failures)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ptr is a pointer to s.
func ptr(s string) *string { return &s }

// run runs sts on db.
func run(t *testing.T, ctx context.Context, db segment.Execer, sts ...segment.Statement) {
	t.Helper()
	for _, s := range sts {
		if _, err := db.Exec(ctx, s.SQL, s.Args...); err != nil {
			t.Fatalf("%s: %v", s.SQL, err)
		}
	}
}

// TestALineThroughThePipeline writes a task's lines as each step and
// person does and reads them back.
func TestALineThroughThePipeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	id := tasktest.Done(t, ctx, pool, "trace-segment")
	read := func() []line { return lines(t, ctx, pool, id) }

	// asr: three lines, then a re-run of the range from 1 that hears one.
	run(t, ctx, pool, segment.Transcribed(id, 0, -1, []segment.Row{
		{StartMS: 0, EndMS: 900, Source: "hello"}, {StartMS: 1000, EndMS: 1900, Source: "world"},
		{StartMS: 2000, EndMS: 2900, Source: "again"}})...)
	run(t, ctx, pool, segment.Translated(id, []int32{0, 1}, []string{"hola", "mundo"}))
	run(t, ctx, pool, segment.Transcribed(id, 1, -1, []segment.Row{{StartMS: 1000, EndMS: 1900, Source: "world"}})...)
	got := read()
	if len(got) != 2 || got[1].mt == nil || *got[1].mt != "mundo" {
		t.Fatalf("after the re-run: %+v; want two lines, the same text keeping its translation", got)
	}
	// A translation is only given to a line without one.
	run(t, ctx, pool, segment.Translated(id, []int32{0}, []string{"buenos"}))
	if got := read(); *got[0].mt != "hola" {
		t.Errorf("translated twice: %q", *got[0].mt)
	}

	// tts: speakers, a clip, a failure, an empty line skipped.
	if err := segment.SpeakersFound(ctx, pool, id, []int32{0, 1}, []string{"A", "B"}, []string{"es", "es_2"}); err != nil {
		t.Fatal(err)
	}
	if err := segment.Synthesised(ctx, pool, id, 0, "k0", []byte(`{"rate":1}`), "es"); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, pool, segment.SynthesisFailed(id, 1, "engine down"))
	if err := segment.Skipped(ctx, pool, id, 0); err != nil { // has audio: kept
		t.Fatal(err)
	}
	got = read()
	if got[0].speaker != "A" || got[0].audio == nil || *got[0].audio != "k0" || got[1].voice != "es_2" ||
		got[1].ttsError != "engine down" || got[1].failures != 1 || got[1].audio != nil {
		t.Fatalf("after tts: %+v", got)
	}
	// A retry with another speaker moves the lines not spoken yet.
	if err := segment.SpeakerChanged(ctx, pool, id, "es_2", "fr"); err != nil {
		t.Fatal(err)
	}
	if got := read(); got[1].voice != "fr" || got[0].voice != "es" {
		t.Errorf("after the speaker's change: %+v", got)
	}
	// A redub clears the line's clip and failures.
	if err := segment.Redubbed(ctx, pool, id, 1, "mundo nuevo"); err != nil {
		t.Fatal(err)
	}
	if got := read(); *got[1].mt != "mundo nuevo" || got[1].failures != 0 || got[1].ttsError != "" {
		t.Errorf("after the redub: %+v", got[1])
	}

	// review: one line edited, then all rewritten from 0.
	if err := segment.Edited(ctx, pool, id, 0, segment.Row{StartMS: 100, EndMS: 800, Source: "hi", Text: ptr("hola"),
		Speaker: "C", Voice: ""}); err != nil {
		t.Fatal(err)
	}
	if got := read(); got[0].start != 100 || got[0].src != "hi" || got[0].speaker != "C" || got[0].voice != "" {
		t.Errorf("after the edit: %+v", got[0])
	}
	if err := segment.Replaced(ctx, pool, id, []segment.Row{{StartMS: 0, EndMS: 500, Source: "one", Speaker: "A", Voice: "es"}}); err != nil {
		t.Fatal(err)
	}
	if got := read(); len(got) != 1 || got[0].src != "one" || got[0].mt != nil || got[0].voice != "es" {
		t.Errorf("after the rewrite: %+v", got)
	}

	// extract_audio: subtitles replace the lines, voices cleared; named
	// speakers then get theirs.
	run(t, ctx, pool, segment.Subtitled(id, []segment.Row{
		{StartMS: 0, EndMS: 500, Source: "uno", Text: ptr("one"), Speaker: "Ann", Voice: "ignored"},
		{StartMS: 600, EndMS: 900, Source: "dos", Speaker: "Bob"}})...)
	got = read()
	if len(got) != 2 || got[0].voice != "" || got[0].audio != nil || *got[0].mt != "one" || got[1].mt != nil {
		t.Fatalf("after the subtitles: %+v", got)
	}
	if err := segment.VoicesNamed(ctx, pool, id, []string{"Ann", "Bob"}, []string{"es", "es_2"}); err != nil {
		t.Fatal(err)
	}
	if got := read(); got[0].voice != "es" || got[1].voice != "es_2" {
		t.Errorf("after the named voices: %+v", got)
	}
}
