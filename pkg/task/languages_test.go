package task_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seedParent makes a running parent task of languages whose extract_audio
// and asr succeeded, with three segments and a glossary.
func seedParent(t *testing.T, pool *pgxpool.Pool, languages ...string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id := uuid.New()
	apply(t, ctx, pool, task.Create(task.Details{ID: id, SourceLanguage: "en", TargetLanguage: languages[0],
		SpeakerID: "", SourceVideoKey: wire.DefaultKeys(id).SourceVideo, OutputVideoKey: wire.DefaultKeys(id).OutputVideo,
		TraceID: "trace-parent", Targets: languages}))
	for _, q := range []string{
		`UPDATE tasks SET status = 'running' WHERE id = $1`,
		`INSERT INTO task_steps (task_id, step, part, attempt, status, finished_at) VALUES
		    ($1, 'extract_audio', '', 1, 'succeeded', now()), ($1, 'asr', 'chunk-00000', 1, 'succeeded', now()),
		    ($1, 'asr', 'merge', 1, 'succeeded', now())`,
		`INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text) VALUES
		    ($1, 0, 0, 900, 'Hello.'), ($1, 1, 1000, 1900, 'Good day.'), ($1, 2, 2000, 2900, 'Goodbye.')`,
		`INSERT INTO task_glossaries (task_id, terms) VALUES ($1, '[{"source":"dubflow"}]')`,
	} {
		if _, err := pool.Exec(ctx, q, id); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// spawnAll spawns a child of parent per language, as the asr worker does
// where the parent's asr completes.
func spawnAll(t *testing.T, pool *pgxpool.Pool, parent uuid.UUID, languages ...string) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for _, l := range languages {
		res, err := task.Apply(context.Background(), pool, task.Spawn(task.Ref{ID: parent, Step: "asr"}, l))
		if err != nil || !res.Changed || res.To != task.Queued {
			t.Fatalf("spawn %s: %+v, %v", l, res, err)
		}
		ids = append(ids, wire.ChildTaskID(parent, l))
	}
	return ids
}

// family makes a parent of languages (seedParent) and spawns its children.
func family(t *testing.T, pool *pgxpool.Pool, languages ...string) (parent uuid.UUID, children []uuid.UUID) {
	t.Helper()
	parent = seedParent(t, pool, languages...)
	return parent, spawnAll(t, pool, parent, languages...)
}

// start starts each task's translate step.
func start(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ids []uuid.UUID) {
	t.Helper()
	for _, id := range ids {
		apply(t, ctx, pool, task.Start(task.Ref{ID: id, Step: "translate"}))
	}
}

// applyAtOnce applies every transition at the same moment, each in a
// transaction of its own, and fails the test on an error (but a refusal
// when refusals are allowed).
func applyAtOnce(t *testing.T, ctx context.Context, pool *pgxpool.Pool, refusals bool, trs ...task.Transition) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(trs))
	begin := make(chan struct{})
	for _, tr := range trs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			if _, err := task.Apply(ctx, pool, tr); err != nil && !(refusals && errors.Is(err, task.ErrRefused)) {
				errs <- fmt.Errorf("%s of %s: %w", tr.Name, tr.TaskID, err)
			}
		}()
	}
	close(begin)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestSpawnMakesEachChildOnceWithWhatItStartsFrom(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	parent, children := family(t, db.Pool, "es", "ca")

	// A redelivered or replayed fan-in spawns nothing again.
	for _, l := range []string{"es", "ca"} {
		res, err := task.Apply(ctx, db.Pool, task.Spawn(task.Ref{ID: parent, Step: "asr"}, l))
		if err != nil || res.Changed || res.EventID != 0 {
			t.Fatalf("second spawn of %s: %+v, %v; want the child kept, nothing announced", l, res, err)
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE parent_task_id = $1`, parent).Scan(&n); err != nil || n != 2 {
		t.Fatalf("children = %d (%v), want 2", n, err)
	}
	// A child of a language the parent has already, under another id, is
	// refused by the unique (parent, language) index, not made twice.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tasks (id, parent_task_id, target_language) VALUES ($1, $2, 'es')`,
		uuid.New(), parent); err == nil {
		t.Fatal("a second child of the same language was accepted")
	}

	for i, l := range []string{"es", "ca"} {
		id := children[i]
		var status, target, src, video, output, trace string
		var par uuid.UUID
		err := db.Pool.QueryRow(ctx, `SELECT status, target_language, source_language, source_video_key, output_video_key,
			trace_id, parent_task_id FROM tasks WHERE id = $1`, id).Scan(&status, &target, &src, &video, &output, &trace, &par)
		if err != nil {
			t.Fatal(err)
		}
		keys := wire.DefaultKeys(id)
		if status != task.Queued || target != l || src != "en" || video != keys.SourceVideo || output != keys.OutputVideo ||
			trace != "trace-parent" || par != parent {
			t.Fatalf("child %s: %s %s %s %s %s %s %s", l, status, target, src, video, output, trace, par)
		}
		var segs, glossary int
		var texts string
		if err := db.Pool.QueryRow(ctx, `SELECT count(*), string_agg(src_text, '|' ORDER BY idx),
			(SELECT count(*) FROM task_glossaries WHERE task_id = $1) FROM segments WHERE task_id = $1 AND mt_text IS NULL`,
			id).Scan(&segs, &texts, &glossary); err != nil {
			t.Fatal(err)
		}
		if segs != 3 || texts != "Hello.|Good day.|Goodbye." || glossary != 1 {
			t.Fatalf("child %s starts with %d segments %q and %d glossaries", l, segs, texts, glossary)
		}
		// extract_audio and asr ran on the parent: the child records them
		// as done by it, so its tts fan-in and the reconciler see them.
		rows, err := db.Pool.Query(ctx, `SELECT step || '/' || part || '/' || status || '/' || worker FROM task_steps
			WHERE task_id = $1 ORDER BY step`, id)
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			steps = append(steps, s)
		}
		want := []string{"asr//succeeded/" + task.InheritedWorker(parent), "extract_audio//succeeded/" + task.InheritedWorker(parent)}
		if strings.Join(steps, ",") != strings.Join(want, ",") {
			t.Fatalf("child %s steps %v, want %v", l, steps, want)
		}
		var succeeded bool
		if err := db.Pool.QueryRow(ctx, `SELECT step_succeeded($1, 'asr')`, id).Scan(&succeeded); err != nil || !succeeded {
			t.Fatalf("child %s: asr succeeded = %v (%v)", l, succeeded, err)
		}
		evs := events(t, db.Pool, id)
		if len(evs) != 1 || evs[0].Event != wire.EventTaskQueued || !strings.Contains(string(evs[0].Data), parent.String()) {
			t.Fatalf("child %s events %+v, want one task.queued naming the parent", l, evs)
		}
	}

	f, err := task.FamilyOf(ctx, db.Pool, parent)
	if err != nil || len(f.Children) != 2 || f.Children[0].TargetLanguage != "es" || f.Children[1].TargetLanguage != "ca" ||
		strings.Join(f.Targets, ",") != "es,ca" {
		t.Fatalf("family of the parent: %+v, %v", f, err)
	}
	if f, err := task.FamilyOf(ctx, db.Pool, children[1]); err != nil || f.ParentID != parent || len(f.Children) != 0 {
		t.Fatalf("family of a child: %+v, %v", f, err)
	}
	if _, err := task.FamilyOf(ctx, db.Pool, uuid.New()); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("family of no task: %v", err)
	}
	if res, err := task.Apply(ctx, db.Pool, task.Spawn(task.Ref{ID: uuid.New()}, "es")); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("spawn under no parent: %+v, %v", res, err)
	}
}

// end runs a child to its end: started, then succeeded or failed.
func end(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, ok bool) {
	t.Helper()
	ctx := context.Background()
	apply(t, ctx, pool, task.Start(task.Ref{ID: id, Step: "translate"}))
	tr := task.Succeed(task.Ref{ID: id, Step: "mux_video"}, json.RawMessage(`{}`), "")
	if !ok {
		tr = task.Fail(task.Ref{ID: id, Step: "tts"}, "", "tts: engine gone")
	}
	apply(t, ctx, pool, tr)
}

func TestTheLastChildToEndConcludesTheParent(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	for _, tc := range []struct {
		name      string
		ok        []bool
		status    string
		event     string
		errorPart string
	}{
		{"all done", []bool{true, true}, task.Done, wire.EventTaskSucceeded, ""},
		{"one failed", []bool{true, false}, task.Failed, wire.EventTaskFailed, "languages: ca: tts: engine gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, children := family(t, db.Pool, "es", "ca")
			end(t, db.Pool, children[0], tc.ok[0])
			if r := read(t, db.Pool, parent); r.status != task.Running {
				t.Fatalf("parent %s after one child of two ended, want running", r.status)
			}
			end(t, db.Pool, children[1], tc.ok[1])
			r := read(t, db.Pool, parent)
			if r.status != tc.status || r.err != tc.errorPart {
				t.Fatalf("parent %s %q, want %s %q", r.status, r.err, tc.status, tc.errorPart)
			}
			var result struct {
				Languages map[string]struct {
					TaskID uuid.UUID `json:"task_id"`
					Status string    `json:"status"`
				} `json:"languages"`
			}
			if err := json.Unmarshal([]byte(r.result), &result); err != nil || len(result.Languages) != 2 ||
				result.Languages["ca"].TaskID != children[1] {
				t.Fatalf("parent result %s (%v)", r.result, err)
			}
			evs := events(t, db.Pool, parent)
			var last *wire.Event
			n := 0
			for _, e := range evs {
				if e.Event == tc.event {
					n, last = n+1, e
				}
			}
			if n != 1 || last.Status != tc.status || last.TraceID != "trace-parent" {
				t.Fatalf("parent events %+v, want one %s", evs, tc.event)
			}
		})
	}
}

func TestAReplayedChildThatSucceedsConcludesAFailedParentDone(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	parent, children := family(t, db.Pool, "es", "ca")
	end(t, db.Pool, children[0], true)
	end(t, db.Pool, children[1], false)
	if r := read(t, db.Pool, parent); r.status != task.Failed {
		t.Fatalf("parent %s, want failed", r.status)
	}
	apply(t, ctx, db.Pool, task.Retry(task.Ref{ID: children[1], Step: "tts"}),
		task.Succeed(task.Ref{ID: children[1], Step: "mux_video"}, nil, ""))
	if r := read(t, db.Pool, parent); r.status != task.Done || r.err != "" {
		t.Fatalf("parent %s %q after the replayed child succeeded, want done", r.status, r.err)
	}
}

// TestCancellingAParentCancelsItsChildren: Cancel of a parent ends its
// unfinished children as cancelled too, each with its own task.cancelled;
// a child done already stays done, and the parent stays cancelled.
func TestCancellingAParentCancelsItsChildren(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	parent, children := family(t, db.Pool, "es", "ca", "fr")
	end(t, db.Pool, children[0], true)
	apply(t, ctx, db.Pool, task.Start(task.Ref{ID: children[1], Step: "translate"}),
		task.Cancel(task.Ref{ID: parent}, "operator"))
	if r := read(t, db.Pool, parent); r.status != task.Cancelled || r.err != "cancelled: operator" {
		t.Fatalf("parent %s %q, want it cancelled", r.status, r.err)
	}
	for i, want := range []string{task.Done, task.Cancelled, task.Cancelled} {
		r := read(t, db.Pool, children[i])
		if r.status != want || (want == task.Cancelled) != (r.err == "cancelled: operator") {
			t.Errorf("child %d: %s %q, want %s", i, r.status, r.err, want)
		}
		n := 0
		for _, e := range events(t, db.Pool, children[i]) {
			if e.Event == wire.EventTaskCancelled {
				n++
				if e.Status != task.Cancelled || e.Error != "cancelled: operator" || e.TraceID != "trace-parent" {
					t.Errorf("child %d: %+v", i, e)
				}
			}
		}
		if n != map[bool]int{true: 1, false: 0}[want == task.Cancelled] {
			t.Errorf("child %d: %d task.cancelled events", i, n)
		}
	}
	// A child's late end leaves the cancelled parent alone, and so does a
	// retried child's success.
	apply(t, ctx, db.Pool, task.Fail(task.Ref{ID: children[1], Step: "tts"}, "", "late"))
	apply(t, ctx, db.Pool, task.Retry(task.Ref{ID: children[2], Step: "tts"}),
		task.Succeed(task.Ref{ID: children[2], Step: "mux_video"}, nil, ""))
	if r := read(t, db.Pool, parent); r.status != task.Cancelled || r.err != "cancelled: operator" {
		t.Fatalf("parent %s %q after a late end, want it left cancelled", r.status, r.err)
	}
}

// TestCancelledChildrenConcludeTheParent cancels children one by one (not
// the parent): the last child to end concludes the parent cancelled when
// none failed, failed when one did, and a cancelled child retried to
// success concludes it again.
func TestCancelledChildrenConcludeTheParent(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	cancel := func(id uuid.UUID) task.Transition { return task.Cancel(task.Ref{ID: id}, "not wanted") }
	for _, tc := range []struct {
		name   string
		ends   func(children []uuid.UUID)
		status string
		event  string
		err    string
	}{
		{"all cancelled", func(c []uuid.UUID) {
			apply(t, ctx, db.Pool, cancel(c[0]), cancel(c[1]))
		}, task.Cancelled, wire.EventTaskCancelled, "languages: ca: cancelled: not wanted; es: cancelled: not wanted"},
		{"one done, one cancelled", func(c []uuid.UUID) {
			end(t, db.Pool, c[0], true)
			apply(t, ctx, db.Pool, cancel(c[1]))
		}, task.Cancelled, wire.EventTaskCancelled, "languages: ca: cancelled: not wanted"},
		{"one failed, one cancelled", func(c []uuid.UUID) {
			apply(t, ctx, db.Pool, cancel(c[0]))
			end(t, db.Pool, c[1], false)
		}, task.Failed, wire.EventTaskFailed, "languages: ca: tts: engine gone; es: cancelled: not wanted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, children := family(t, db.Pool, "es", "ca")
			tc.ends(children)
			r := read(t, db.Pool, parent)
			if r.status != tc.status || r.err != tc.err {
				t.Fatalf("parent %s %q, want %s %q", r.status, r.err, tc.status, tc.err)
			}
			n := 0
			for _, e := range events(t, db.Pool, parent) {
				if e.Event == tc.event {
					n++
					if e.Status != tc.status || e.Error != tc.err {
						t.Errorf("parent event %+v", e)
					}
				}
			}
			if n != 1 {
				t.Fatalf("%d parent %s events, want 1", n, tc.event)
			}
			// Every cancelled child retried to success concludes the
			// parent done.
			for _, c := range children {
				if read(t, db.Pool, c).status != task.Done {
					apply(t, ctx, db.Pool, task.Retry(task.Ref{ID: c, Step: "tts"}),
						task.Succeed(task.Ref{ID: c, Step: "mux_video"}, nil, ""))
				}
			}
			if r := read(t, db.Pool, parent); r.status != task.Done || r.err != "" {
				t.Fatalf("parent %s %q after its children were retried to success, want done", r.status, r.err)
			}
		})
	}
}

// TestChildrenEndingAtOnceConcludeTheParentOnce ends every child of a
// parent at the same moment, many times over: the parent ends exactly once.
func TestChildrenEndingAtOnceConcludeTheParentOnce(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	languages := []string{"es", "ca", "fr", "de", "it", "pt"}
	for round := range 10 {
		parent, children := family(t, db.Pool, languages...)
		start(t, ctx, db.Pool, children)
		var ends []task.Transition
		for i, c := range children {
			tr := task.Succeed(task.Ref{ID: c, Step: "mux_video"}, nil, "")
			if round%2 == 1 && i == 0 {
				tr = task.Fail(task.Ref{ID: c, Step: "tts"}, "", "tts: engine gone")
			}
			ends = append(ends, tr)
		}
		applyAtOnce(t, ctx, db.Pool, false, ends...)
		want, event := task.Done, wire.EventTaskSucceeded
		if round%2 == 1 {
			want, event = task.Failed, wire.EventTaskFailed
		}
		if r := read(t, db.Pool, parent); r.status != want {
			t.Fatalf("round %d: parent %s, want %s", round, r.status, want)
		}
		n := 0
		for _, e := range events(t, db.Pool, parent) {
			if e.Event == event {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d %s events of the parent, want 1", round, n, event)
		}
	}
}

// TestSettleRecordsTheTargets: a task made by its first step (a message
// published without dubctl) records its languages; a Settle naming none
// keeps those recorded.
func TestSettleRecordsTheTargets(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	id := uuid.New()
	targets := func() string {
		var ts []string
		if err := db.Pool.QueryRow(ctx, `SELECT targets FROM tasks WHERE id = $1`, id).Scan(&ts); err != nil {
			t.Fatal(err)
		}
		return strings.Join(ts, ",")
	}
	d := task.Details{ID: id, SourceLanguage: "en", TargetLanguage: "es", Targets: []string{"es", "ca"}}
	apply(t, ctx, db.Pool, task.Settle(d))
	if got := targets(); got != "es,ca" {
		t.Fatalf("targets %q after Settle, want es,ca", got)
	}
	d.Targets = nil
	apply(t, ctx, db.Pool, task.Settle(d))
	if got := targets(); got != "es,ca" {
		t.Fatalf("targets %q after a Settle naming none, want es,ca kept", got)
	}
}

// TestCancelAndChildrenEndingAtOnceNeverDeadlock cancels a parent while all
// of its children end: Cancel locks the parent, then its children; a child's
// end locks the child, then its parent. No deadlock may come of it, and the
// tasks end consistent: a parent done has every child done; a cancelled one
// leaves none unfinished but a child whose end was committing (skipped).
func TestCancelAndChildrenEndingAtOnceNeverDeadlock(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	languages := []string{"es", "ca", "fr", "de"}
	for round := range 10 {
		parent, children := family(t, db.Pool, languages...)
		start(t, ctx, db.Pool, children)
		trs := []task.Transition{task.Cancel(task.Ref{ID: parent}, "operator")}
		for _, c := range children {
			trs = append(trs, task.Succeed(task.Ref{ID: c, Step: "mux_video"}, nil, ""))
		}
		applyAtOnce(t, ctx, db.Pool, true, trs...)
		p := read(t, db.Pool, parent)
		for _, c := range children {
			r := read(t, db.Pool, c)
			if r.status != task.Done && r.status != task.Cancelled {
				t.Errorf("round %d: child %s left %s", round, c, r.status)
			}
			if p.status == task.Done && r.status != task.Done {
				t.Errorf("round %d: parent done, child %s %s", round, c, r.status)
			}
		}
		if p.status != task.Done && p.err != "cancelled: operator" {
			t.Errorf("round %d: parent %s %q", round, p.status, p.err)
		}
	}
}

// TestSpawnPassesTheBurnedSubtitlesOn: a parent that asked for subtitles
// burned in has children that do too (their plans'), and a parent that did
// not has children without a plan.
func TestSpawnPassesTheBurnedSubtitlesOn(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	for _, burn := range []string{"bilingual", ""} {
		parent := seedParent(t, db.Pool, "es", "ca")
		if burn != "" {
			sql, args := task.SavePlan(parent, task.Plan{BurnSubtitles: burn})
			if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
				t.Fatal(err)
			}
		}
		for _, child := range spawnAll(t, db.Pool, parent, "es", "ca") {
			plan, err := task.LoadPlan(ctx, db.Pool, child)
			if err != nil || plan.BurnSubtitles != burn || len(plan.Skipped) != 0 {
				t.Errorf("parent burning %q: child's plan %+v, %v", burn, plan, err)
			}
		}
	}
}
