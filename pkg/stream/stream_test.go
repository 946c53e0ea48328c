package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/segment"
	"github.com/dubflow/dubflow/pkg/stream"
	"github.com/dubflow/dubflow/pkg/task/tasktest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestNextMakesOnlyWhatIsFinal: a batch ends where a line starts whose
// lines before are all synthesized, and never past the first chunk asr has
// not transcribed; the end of the timeline is final only when every chunk
// is transcribed and every line synthesized. Two runs that made the same
// stretch record it once.
func TestNextMakesOnlyWhatIsFinal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	id := tasktest.Done(t, ctx, pool, "trace-stream")
	chunk(t, ctx, pool, id, 0, 0, 0)
	chunk(t, ctx, pool, id, 1, 55_000, 5_000) // transcribes from 60 s
	lines(t, ctx, pool, id, 0, 12_000, 25_000, 61_000)
	for idx := range 3 {
		if err := segment.Synthesised(ctx, pool, id, idx, fmt.Sprintf("tts/%s/%d.wav", id, idx), []byte(`{}`), "es"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() stream.Plan {
		t.Helper()
		p, _, err := stream.Next(ctx, pool, id)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := next(); p.Ok {
		t.Fatalf("before the first chunk is transcribed: %+v, want nothing to make", p)
	}
	transcribed(t, ctx, pool, id, 0)
	p := next()
	if !p.Ok || p.Final || p.FromMS != 0 || p.ToMS != 25_000 {
		t.Fatalf("first chunk transcribed, lines to 61 s synthesized but the one at 61 s: %+v, want 0..25000", p)
	}
	batch := stream.Batch{FromMS: 0, ToMS: 25_000, MapKey: "outputs/x/stream/init.mp4",
		Pieces: []stream.Piece{{Key: "outputs/x/stream/b0-000.m4s", DurationMS: 6000}}, VTTKey: "outputs/x/stream/b0.vtt"}
	init := stream.Init{Key: "outputs/x/stream/init.mp4", SHA256: "ab", Codecs: "avc1.64000d,mp4a.40.2"}
	for i, want := range []bool{true, false} {
		ok, err := stream.Record(ctx, pool, id, batch, 0, false, init)
		if err != nil || ok != want {
			t.Fatalf("record %d of the same stretch: %v, %v; want %v", i+1, ok, err, want)
		}
	}
	if p := next(); p.Ok {
		t.Fatalf("up to the untranscribed chunk only lines shorter than a batch: %+v", p)
	}
	transcribed(t, ctx, pool, id, 1)
	// The line at 25 s now knows where the next starts: up to there.
	if p := next(); !p.Ok || p.Final || p.FromMS != 25_000 || p.ToMS != 61_000 {
		t.Fatalf("every chunk transcribed, the line at 61 s not synthesized: %+v, want 25000..61000", p)
	}
	middle := batch
	middle.FromMS, middle.ToMS = 25_000, 61_000
	if ok, err := stream.Record(ctx, pool, id, middle, 0, false, init); err != nil || !ok {
		t.Fatalf("record the middle batch: %v, %v", ok, err)
	}
	if p := next(); p.Ok {
		t.Fatalf("the last line not synthesized: %+v, want nothing", p)
	}
	if err := segment.Synthesised(ctx, pool, id, 3, fmt.Sprintf("tts/%s/3.wav", id), []byte(`{}`), "es"); err != nil {
		t.Fatal(err)
	}
	if p := next(); !p.Ok || !p.Final || p.FromMS != 61_000 {
		t.Fatalf("everything final: %+v, want the rest of the timeline from 61000", p)
	}
	last := batch
	last.FromMS, last.ToMS = 61_000, 70_000
	if ok, err := stream.Record(ctx, pool, id, last, 70_000, true, init); err != nil || !ok {
		t.Fatalf("record the last batch: %v, %v", ok, err)
	}
	st, err := stream.Load(ctx, pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Ended || st.MadeUntilMS != 70_000 || st.TotalMS != 70_000 || len(st.Batches) != 3 || st.Init != init {
		t.Fatalf("stream %+v", st)
	}
	if p := next(); p.Ok {
		t.Errorf("an ended stream: %+v, want nothing to make", p)
	}
	if sum, err := stream.Summarize(ctx, pool, id); err != nil || sum.PlayableMS != 70_000 || !sum.Ended ||
		sum.Playlist != "outputs/x/stream/"+stream.MasterName {
		t.Errorf("summary %+v, %v", sum, err)
	}
	if _, err := stream.Load(ctx, pool, uuid.New()); !errors.Is(err, stream.ErrNone) {
		t.Errorf("a task without a stream: %v, want ErrNone", err)
	}
}

// TestPlaylists: the media playlist is an EVENT playlist that names an
// init segment again only where a batch needs another, ends only when
// asked, and a re-dub's names its own files.
func TestPlaylists(t *testing.T) {
	t.Parallel()
	dir := "outputs/x/stream/"
	st := &stream.State{Version: 1, Batches: []stream.Batch{
		{FromMS: 0, ToMS: 13_000, MapKey: dir + "init.mp4", VTTKey: dir + "b0.vtt",
			Pieces: []stream.Piece{{Key: dir + "b0-000.m4s", DurationMS: 6000}, {Key: dir + "b0-001.m4s", DurationMS: 7000}}},
		{FromMS: 13_000, ToMS: 20_000, MapKey: dir + "init-13000.mp4", VTTKey: dir + "v2-b13000.vtt",
			Pieces: []stream.Piece{{Key: dir + "v2-b13000-000.m4s", DurationMS: 7000}}},
	}}
	n := stream.Relative(dir, 2)
	video := stream.Video(st, n, false)
	for _, want := range []string{"#EXT-X-PLAYLIST-TYPE:EVENT\n", "#EXT-X-TARGETDURATION:7\n", "#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:6.000,\nb0-000.m4s\n",
		"#EXT-X-MAP:URI=\"init-13000.mp4\"\n#EXTINF:7.000,\nv2-b13000-000.m4s\n"} {
		if !strings.Contains(video, want) {
			t.Errorf("video playlist lacks %q:\n%s", want, video)
		}
	}
	if strings.Contains(video, "ENDLIST") || !strings.HasSuffix(stream.Video(st, n, true), "#EXT-X-ENDLIST\n") {
		t.Errorf("ENDLIST only when ended:\n%s", video)
	}
	subs := stream.Subtitles(st, n, true)
	if !strings.Contains(subs, "#EXTINF:13.000,\nb0.vtt\n#EXTINF:7.000,\nv2-b13000.vtt\n#EXT-X-ENDLIST") {
		t.Errorf("subtitles playlist:\n%s", subs)
	}
	master := stream.Master(n, "avc1.64000d,mp4a.40.2", "es")
	if !strings.Contains(master, `CODECS="avc1.64000d,mp4a.40.2"`) || !strings.Contains(master, "\nvideo-v2.m3u8\n") ||
		!strings.Contains(master, `URI="subtitles-v2.m3u8"`) || !strings.Contains(master, `LANGUAGE="es"`) {
		t.Errorf("multivariant playlist:\n%s", master)
	}
}

// chunk registers asr's chunk part n of the task with its message.
func chunk(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id uuid.UUID, n, offset, lead int) {
	t.Helper()
	body := fmt.Sprintf(`{"payload":{"chunk":{"index":%d,"offset_ms":%d,"lead_ms":%d}}}`, n, offset, lead)
	if _, err := pool.Exec(ctx, `INSERT INTO step_parts (task_id, step, part, message) VALUES ($1, 'asr', $2, $3)`,
		id, fmt.Sprintf("chunk-%05d", n), []byte(body)); err != nil {
		t.Fatal(err)
	}
}

// transcribed records chunk n's success.
func transcribed(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id uuid.UUID, n int) {
	t.Helper()
	if _, err := pool.Exec(ctx, `INSERT INTO task_steps (task_id, step, part, attempt, status, finished_at)
		VALUES ($1, 'asr', $2, 1, 'succeeded', now())`, id, fmt.Sprintf("chunk-%05d", n)); err != nil {
		t.Fatal(err)
	}
}

// lines writes the task's lines starting at starts, a second long each.
func lines(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id uuid.UUID, starts ...int) {
	t.Helper()
	var rows []segment.Row
	for _, s := range starts {
		rows = append(rows, segment.Row{StartMS: s, EndMS: s + 1000, Source: "line"})
	}
	for _, st := range segment.Transcribed(id, 0, -1, rows) {
		if _, err := pool.Exec(ctx, st.SQL, st.Args...); err != nil {
			t.Fatal(err)
		}
	}
}
