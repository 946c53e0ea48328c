package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/stream"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// TestStreamEndsWhenTheTaskEnds: a task whose stream is stored (growing,
// not ended) fails, as a dead letter fails it (task.Fail in a transaction,
// its event published by outbox.Commit); another is cancelled without
// anyone calling stream.End. mux_video, reading event.task.failed and
// event.task.cancelled from its own queue, ends both stored playlists
// (#EXT-X-ENDLIST, task_streams.ended_at), after events it cannot read,
// of a task that does not exist and of a task without a stream.
func TestStreamEndsWhenTheTaskEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.NewStack(t, run, nil)
	s.Start()
	pool := s.DB.Pool
	failed, cancelled := streamed(t, ctx, pool, s.Blob), streamed(t, ctx, pool, s.Blob)
	bare := running(t, ctx, pool)
	if got := storedPlaylist(t, ctx, s, failed); strings.Contains(got, "#EXT-X-ENDLIST") {
		t.Fatalf("the growing stream is stored ended already:\n%s", got)
	}
	for _, body := range []string{"not json", `{"event":"task.failed","occurred_at":"2024-01-01T12:00:00Z"}`,
		`{"event":"task.failed","task_id":"` + uuid.NewString() + `","status":"failed","occurred_at":"2024-01-01T12:00:00Z"}`} {
		s.PublishRaw(wire.EventPrefix+wire.EventTaskFailed, []byte(body))
	}
	conn, err := broker.Dial(ctx, s.Env["AMQP_URL"], "stream-end-test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	pub := broker.NewPublisher(conn)
	for _, tr := range []task.Transition{
		task.Fail(task.Ref{ID: bare, Step: wire.StepTTS}, "", "tts: no voice"),
		task.Fail(task.Ref{ID: failed, Step: wire.StepTTS}, "", "tts: no voice"),
		task.Cancel(task.Ref{ID: cancelled}, "by a test, past stream.End"),
	} {
		if err := outbox.Commit(ctx, pool, pub, func(tx pgx.Tx) ([]int64, error) {
			res, err := task.Apply(ctx, tx, tr)
			return []int64{res.EventID}, err
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []uuid.UUID{failed, cancelled} {
		testenv.EventuallyWithin(t, 20*time.Second, "the stored stream of "+id.String()+" to end", func() bool {
			sum, err := stream.Summarize(ctx, pool, id)
			return err == nil && sum.Ended && strings.HasSuffix(storedPlaylist(t, ctx, s, id), "#EXT-X-ENDLIST\n")
		})
	}
	if sum, err := stream.Summarize(ctx, pool, bare); sum != nil || err != nil {
		t.Errorf("a task without a stream has one now: %+v, %v", sum, err)
	}
	testenv.Eventually(t, "every event taken", func() bool { return s.Depth(wire.QueueStreamEnd) == 0 })
}

// TestStreamEndWaitsOutAnObjectStoreOutage: while the object store
// refuses the playlists, the event is handed back (never acked) and the
// stream stays unended, so that the next delivery ends it; the event of a
// task retried since changes nothing.
func TestStreamEndWaitsOutAnObjectStoreOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.Postgres(t).Pool
	objects := &flakyStore{}
	id := streamed(t, ctx, pool, objects)
	objects.fails = 2
	if _, err := task.Apply(ctx, pool, task.Fail(task.Ref{ID: id}, "", "asr: broken")); err != nil {
		t.Fatal(err)
	}
	e := &streamEnd{db: pool, objects: objects, log: zerolog.Nop()}
	settle := &step.Settler{Pause: func(int32) time.Duration { return time.Millisecond }}
	body := event(t, id, wire.EventTaskFailed)
	for i, want := range []string{"handed back", "handed back", "acked"} {
		if got := deliver(ctx, e, settle, body); got != want {
			t.Fatalf("delivery %d: %s, want %s", i+1, got, want)
		}
		sum, err := stream.Summarize(ctx, pool, id)
		if err != nil || sum.Ended != (want == "acked") {
			t.Fatalf("after delivery %d (%s) the stream is %+v, %v", i+1, want, sum, err)
		}
	}
	if got := objects.get(stream.Dir(wire.DefaultKeys(id).OutputVideo) + stream.VideoName); !strings.HasSuffix(got, "#EXT-X-ENDLIST\n") {
		t.Errorf("stored playlist not ended:\n%s", got)
	}

	retried := streamed(t, ctx, pool, objects)
	for _, tr := range []task.Transition{task.Cancel(task.Ref{ID: retried}, "by a test"), task.Retry(task.Ref{ID: retried})} {
		if _, err := task.Apply(ctx, pool, tr); err != nil {
			t.Fatal(err)
		}
	}
	if got := deliver(ctx, e, settle, event(t, retried, wire.EventTaskCancelled)); got != "acked" {
		t.Fatalf("the event of a task retried since: %s, want acked", got)
	}
	if sum, err := stream.Summarize(ctx, pool, retried); err != nil || sum.Ended {
		t.Errorf("the stream of a task retried since ended: %+v, %v", sum, err)
	}
}

// streamed creates a running task from en into es whose stream has one
// batch made and its playlists stored in objects (growing, not ended).
func streamed(t *testing.T, ctx context.Context, pool *pgxpool.Pool, objects stream.Putter) uuid.UUID {
	t.Helper()
	id := running(t, ctx, pool)
	dir := stream.Dir(wire.DefaultKeys(id).OutputVideo)
	init := stream.Init{Key: dir + "init.mp4", SHA256: "ab", Codecs: "avc1.64000d,mp4a.40.2"}
	batch := stream.Batch{FromMS: 0, ToMS: 12_000, MapKey: init.Key, VTTKey: dir + "b0.vtt",
		Pieces: []stream.Piece{{Key: dir + "b0-000.m4s", DurationMS: 6000}, {Key: dir + "b0-001.m4s", DurationMS: 6000}}}
	if _, _, err := stream.Next(ctx, pool, id); err != nil {
		t.Fatal(err)
	}
	if ok, err := stream.Record(ctx, pool, id, batch, 0, false, init); err != nil || !ok {
		t.Fatalf("record the first batch of %s: %v, %v", id, ok, err)
	}
	if err := stream.Store(ctx, pool, objects, id, dir, "es"); err != nil {
		t.Fatal(err)
	}
	return id
}

// running creates a running task from en into es.
func running(t *testing.T, ctx context.Context, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	for _, tr := range []task.Transition{
		task.Create(task.Details{ID: id, SourceLanguage: "en", TargetLanguage: "es", SpeakerID: "es",
			SourceVideoKey: keys.SourceVideo, OutputVideoKey: keys.OutputVideo, TraceID: "trace-stream-end"}),
		task.Start(task.Ref{ID: id}),
	} {
		if _, err := task.Apply(ctx, pool, tr); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
	}
	return id
}

// storedPlaylist reads the task's stored media playlist of the video.
func storedPlaylist(t *testing.T, ctx context.Context, s *testenv.Stack, id uuid.UUID) string {
	t.Helper()
	b, err := s.Blob.Get(ctx, stream.Dir(wire.DefaultKeys(id).OutputVideo)+stream.VideoName, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// event is the body of the task's event name.
func event(t *testing.T, id uuid.UUID, name string) []byte {
	t.Helper()
	e := &wire.Event{Event: name, TaskID: id, Status: strings.TrimPrefix(name, "task."), OccurredAt: time.Now().UTC()}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deliver hands body to e as one delivery and says how it was settled.
func deliver(ctx context.Context, e *streamEnd, settle *step.Settler, body []byte) string {
	out := "not settled"
	e.handle(ctx, step.Delivery{Body: body, RoutingKey: wire.EventPrefix + wire.EventTaskFailed,
		Ack: func() error { out = "acked"; return nil },
		Nack: func(requeue bool) error {
			out = map[bool]string{true: "handed back", false: "dropped"}[requeue]
			return nil
		}}, settle)
	return out
}

// flakyStore is an object store in memory that refuses its first fails
// puts.
type flakyStore struct {
	mu      sync.Mutex
	fails   int
	objects map[string]string
}

func (f *flakyStore) Put(_ context.Context, key string, r io.Reader, _ int64, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return errors.New("object store down")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if f.objects == nil {
		f.objects = map[string]string{}
	}
	f.objects[key] = string(b)
	return nil
}

func (f *flakyStore) get(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.objects[key]
}
