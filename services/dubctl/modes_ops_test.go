package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
)

// rfc3339 finds the times a command prints.
var rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// alike runs a command in each mode on objects of that mode's own (made
// by mk, which returns the arguments and the names to set aside), and
// checks that both exit with want and print the same standard output and
// error once those names and the times are set aside; it returns the
// database mode's output.
func (m *modes) alike(t *testing.T, want int, mk func(mode string) ([]string, map[string]string)) (stdout, stderr string) {
	t.Helper()
	var outs, errs []string
	for _, mode := range modeNames {
		args, names := mk(mode)
		m.use(t, mode)
		o, e, code := run(t, args...)
		if code != want {
			t.Fatalf("%s mode: dubctl %v: exit %d, want %d\n%s%s", mode, args, code, want, o, e)
		}
		for from, to := range names {
			o, e = strings.ReplaceAll(o, from, to), strings.ReplaceAll(e, from, to)
		}
		outs, errs = append(outs, rfc3339.ReplaceAllString(o, "TIME")), append(errs, e)
	}
	if outs[0] != outs[1] || errs[0] != errs[1] {
		t.Fatalf("the modes differ\ndatabase mode:\n%s%s\nconsole mode:\n%s%s", outs[0], errs[0], outs[1], errs[1])
	}
	return outs[0], errs[0]
}

// task inserts a task in status with its video's keys; error is its error.
func (e *env) task(t *testing.T, status, errText string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	keys := wire.DefaultKeys(id)
	e.exec(t, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key, output_video_key, error,
		trace_id) VALUES ($1, $2, 'en', 'es', $3, $4, $5, 'trace-ops')`, id, status, keys.SourceVideo, keys.OutputVideo, errText)
	return id
}

// deadLetter inserts dead letter id of task's extract_audio message, of
// class.
func (e *env) deadLetter(t *testing.T, id int64, task uuid.UUID, class string) {
	t.Helper()
	env, _ := wire.New(wire.StepExtractAudio, task, "", wire.ExtractAudio{SourceVideoKey: wire.DefaultKeys(task).SourceVideo,
		OutputAudioKey: wire.DefaultKeys(task).SourceAudio})
	b, _ := env.Marshal()
	e.exec(t, `INSERT INTO dead_letters (id, message_id, task_id, step, attempt, error_class, failure_reason,
		original_message) VALUES ($1, $2, $3, 'extract_audio', 3, $4, 'boom', $5)`, id, uuid.NewString(), task, class, b)
}

// TestEveryActionInBothModes runs each operator action of the API through
// dubctl in database mode and through the console, each mode on objects of
// its own, and compares what they print (the objects' ids and the times
// set aside): cancel, retry, bulk replay and purge with and without a dry
// run, pause and resume, a re-drive of compensating tasks; the reads of the
// same rows (search, timeline, compensations, audit) print the same bytes;
// a refusal reads the same in both; and both write the same audit rows,
// but for who acted.
func TestEveryActionInBothModes(t *testing.T) {
	e := setup(t)
	m := &modes{e: e, console: startConsole(t, e)}
	byMode := func(make func(mode string) uuid.UUID) map[string]uuid.UUID {
		ids := map[string]uuid.UUID{}
		for _, mode := range modeNames {
			ids[mode] = make(mode)
		}
		return ids
	}
	// Who acts: the console names its token "admin"; database mode is told so.
	asAdmin := func(mode string, args ...string) []string {
		if mode == "database" {
			return append(args, "--as", "admin")
		}
		return args
	}

	queued := byMode(func(string) uuid.UUID { return e.task(t, "queued", "") })
	t.Run("cancel", func(t *testing.T) {
		out, _ := m.alike(t, 0, func(mode string) ([]string, map[string]string) {
			return asAdmin(mode, "cancel", queued[mode].String(), "--json"), map[string]string{queued[mode].String(): "ID"}
		})
		if !strings.Contains(out, `"status": "cancelled"`) || !strings.Contains(out, `"error": "cancelled: by an operator with dubctl"`) {
			t.Errorf("cancel printed\n%s", out)
		}
		_, stderr := m.alike(t, cli.ExitFailed, func(mode string) ([]string, map[string]string) {
			return asAdmin(mode, "cancel", queued[mode].String()), map[string]string{queued[mode].String(): "ID"}
		})
		if !strings.Contains(stderr, "cancelled") {
			t.Errorf("a second cancel: %s", stderr)
		}
	})
	failed := byMode(func(string) uuid.UUID {
		id := e.task(t, "failed", "extract_audio: boom")
		e.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, worker, started_at, finished_at, error)
			VALUES ($1, 'extract_audio', 1, 'failed', 'w', now() - interval '2 s', now() - interval '1 s', 'boom')`, id)
		return id
	})
	t.Run("retry", func(t *testing.T) {
		out, _ := m.alike(t, 0, func(mode string) ([]string, map[string]string) {
			return asAdmin(mode, "retry", failed[mode].String(), "--json"), map[string]string{failed[mode].String(): "ID"}
		})
		if !strings.Contains(out, `"status": "running"`) || !strings.Contains(out, `"step": "extract_audio"`) ||
			!strings.Contains(out, `"attempt": 2`) {
			t.Errorf("retry printed\n%s", out)
		}
		_, stderr := m.alike(t, cli.ExitFailed, func(mode string) ([]string, map[string]string) {
			return asAdmin(mode, "retry", failed[mode].String()), map[string]string{failed[mode].String(): "ID"}
		})
		if !strings.Contains(stderr, "task ID is running; only a failed, cancelled or compensating task is retried") {
			t.Errorf("a second retry: %s", stderr)
		}
		// Database mode's retry is an operator event of the task's timeline,
		// as the console's is.
		for _, mode := range modeNames {
			m.use(t, "database")
			out, _, _ := run(t, "timeline", failed[mode].String(), "--json")
			if !strings.Contains(out, `"kind": "operator",
      "status": "retry",`) || !strings.Contains(out, `"actor": "admin"`) {
				t.Errorf("timeline of the task retried in %s mode:\n%s", mode, out)
			}
		}
	})
	t.Run("dead letters in bulk", func(t *testing.T) { bulkInBothModes(t, e, m, asAdmin) })
	t.Run("pause and resume", func(t *testing.T) {
		for _, verb := range []string{"pause", "resume"} {
			m.alike(t, 0, func(mode string) ([]string, map[string]string) {
				return asAdmin(mode, "queues", verb, "tts", "--json"), nil
			})
		}
	})
	compensating := byMode(func(string) uuid.UUID {
		id := e.task(t, "compensating", "tts: engine down")
		e.exec(t, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_error)
			VALUES ($1, 0, 0, 900, 'hello', 'hola', 'engine down')`, id)
		for _, s := range []string{"extract_audio", "asr", "translate"} {
			e.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, worker, started_at, finished_at)
				VALUES ($1, $2, 1, 'succeeded', 'w', now() - interval '2 s', now() - interval '1 s')`, id, s)
		}
		return id
	})
	t.Run("compensations", func(t *testing.T) {
		if v := m.sameJSON(t, 0, nil, "compensations", "--json").([]any); len(v) != 2 {
			t.Errorf("compensations: %v", v)
		}
		out, _ := m.alike(t, 0, func(mode string) ([]string, map[string]string) {
			return asAdmin(mode, "compensations", "requeue", "--limit", "1", "--json"),
				map[string]string{compensating["database"].String(): "ID", compensating["console"].String(): "ID"}
		})
		if !strings.Contains(out, `"missingSegments": [`) {
			t.Errorf("requeue printed\n%s", out)
		}
	})
	t.Run("reads of the same rows", func(t *testing.T) {
		single := queued["database"]
		e.exec(t, `INSERT INTO worker_processes (id, service, host, pid, version, steps, consumers, started_at)
			VALUES ('tts-1', 'tts', 'host-a', 42, 'v1', '{tts}', 1, now() - interval '1 minute')`)
		for _, args := range [][]string{
			{"list", "--json", "-q", single.String()[:8]}, {"search", single.String()[:8], "--json"},
			{"list", "--json", "--language", "es", "--since", "1h"}, {"list", "--json", "--error", "BOOM", "--children"},
			{"list", "--json", "--status", "cancelled", "--until", "2999-01-01"},
			{"timeline", failed["console"].String(), "--json"}, {"audit", "--json"}, {"audit", "--json", "--action", "cancel"},
			{"status", failed["database"].String(), "--json"}, {"workers", "--json"},
		} {
			m.sameJSON(t, 0, nil, args...)
		}
		if v := m.sameJSON(t, 0, nil, "workers", "--json").(map[string]any); len(v["workers"].([]any)) != 1 {
			t.Errorf("workers: %v", v)
		}
		if v := m.sameJSON(t, 0, nil, "search", single.String()[:8], "--json").([]any); len(v) != 1 {
			t.Errorf("search by id prefix found %d tasks", len(v))
		}
	})
	t.Run("refusals read the same", func(t *testing.T) { refusalsInBothModes(t, e, m, queued["console"], asAdmin) })
	t.Run("audit rows", func(t *testing.T) { sameAuditRows(t, e) })
}

// bulkInBothModes: a dry run counts the same dead letters in both modes; a
// replay and a purge of each mode's own (told apart by their error class)
// print the same result.
func bulkInBothModes(t *testing.T, e *env, m *modes, asAdmin func(string, ...string) []string) {
	// Each mode's dead letters and their tasks, set aside by their place.
	names := map[string]map[string]string{}
	next := int64(1000)
	for _, mode := range modeNames {
		names[mode] = map[string]string{"replay-" + mode: "CLASS", "purge-" + mode: "CLASS"}
		for i := range 2 {
			for _, verb := range []string{"replay", "purge"} {
				task := e.task(t, "failed", "boom")
				e.deadLetter(t, next, task, verb+"-"+mode)
				names[mode][fmt.Sprint(next)] = fmt.Sprintf("DL-%s-%d", verb, i)
				names[mode][task.String()] = fmt.Sprintf("TASK-%s-%d", verb, i)
				next++
			}
		}
	}
	same := func(want int, args ...string) string {
		out, _ := m.alike(t, want, func(mode string) ([]string, map[string]string) {
			a := make([]string, len(args))
			for i, s := range args {
				a[i] = strings.ReplaceAll(s, "MODE", mode)
			}
			return asAdmin(mode, a...), names[mode]
		})
		return out
	}
	if out := same(0, "dlq", "replay", "--all", "--dry-run", "--json"); !strings.Contains(out, `"matched": 8`) ||
		!strings.Contains(out, `"replayable": 8`) || !strings.Contains(out, `"replayed": null`) {
		t.Errorf("dry run printed\n%s", out)
	}
	if out := same(0, "dlq", "purge", "--error-class", "purge-MODE", "--dry-run", "--json"); !strings.Contains(out, `"matched": 2`) {
		t.Errorf("dry purge printed\n%s", out)
	}
	if out := same(0, "dlq", "replay", "--all", "--error-class", "replay-MODE", "--json"); strings.Count(out, `"attempt": 2`) != 2 {
		t.Errorf("replay printed\n%s", out)
	}
	if out := same(0, "dlq", "purge", "--error-class", "purge-MODE", "--json"); !strings.Contains(out, "DL-purge-0,\n    DL-purge-1") {
		t.Errorf("purge printed\n%s", out)
	}
	same(0, "dlq", "purge", "--error-class", "purge-MODE")
	var left int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM dead_letters WHERE error_class LIKE 'purge-%'`).
		Scan(&left); err != nil || left != 0 {
		t.Errorf("%d dead letters left after the purges (%v)", left, err)
	}
}

// refusalsInBothModes: an error reads the same in both modes, with the same
// exit code.
func refusalsInBothModes(t *testing.T, e *env, m *modes, cancelled uuid.UUID, asAdmin func(string, ...string) []string) {
	missing := uuid.NewString()
	done := uuid.New()
	e.doneTask(t, done, "es", nil)
	for _, c := range []struct {
		code int
		args []string
	}{
		{cli.ExitFailed, []string{"status", missing}},
		{cli.ExitFailed, []string{"segments", missing}},
		{cli.ExitFailed, []string{"timeline", missing, "--json"}},
		{cli.ExitFailed, []string{"cancel", missing}},
		{cli.ExitFailed, []string{"retry", done.String()}},
		{cli.ExitFailed, []string{"retry", missing}},
		{cli.ExitFailed, []string{"cancel", cancelled.String()}},
		{cli.ExitFailed, []string{"dlq", "show", "987654"}},
		{cli.ExitFailed, []string{"dlq", "replay", "987654"}},
		{cli.ExitFailed, []string{"queues", "pause", "transcode"}},
		{cli.ExitUsage, []string{"redub", done.String(), "--segment", "1", "--text", "hola \u202eadiós"}},
		{cli.ExitUsage, []string{"redub", done.String(), "--segment", "9", "--text", "hola"}},
		{cli.ExitUsage, []string{"audit", "--cursor", "bogus"}},
		{cli.ExitUsage, []string{"list", "--status", "finished"}},
		{cli.ExitUsage, []string{"list", "--since", "yesterday"}},
		{cli.ExitUsage, []string{"dlq", "purge"}},
		{cli.ExitUsage, []string{"dlq", "replay", "--all", "--until", "soon"}},
	} {
		_, stderr := m.alike(t, c.code, func(mode string) ([]string, map[string]string) { return asAdmin(mode, c.args...), nil })
		if !strings.HasPrefix(stderr, "dubctl: ") || strings.Contains(stderr, "console") || strings.Contains(stderr, "HTTP") {
			t.Errorf("dubctl %v: %q", c.args, stderr)
		}
	}
}

// sameAuditRows: each action wrote one audit row per mode, the same but
// for who acted (the console's token, in role admin; database mode's
// --as, in role database) and the objects' ids.
func sameAuditRows(t *testing.T, e *env) {
	rows, err := e.db.Pool.Query(context.Background(), `SELECT role, actor, action, outcome, status, detail::text
		FROM console_audit ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string][]string{}
	ids := regexp.MustCompile(`[0-9a-f-]{36}|-(database|console)\b`)
	for rows.Next() {
		var role, actor, action, outcome, detail string
		var status int
		if err := rows.Scan(&role, &actor, &action, &outcome, &status, &detail); err != nil {
			t.Fatal(err)
		}
		if actor != "admin" || (role != "admin" && role != "database") {
			t.Errorf("%s by %q in role %q", action, actor, role)
		}
		row := fmt.Sprintf("%s %d %s %s", action, status, ids.ReplaceAllString(outcome, "ID"), ids.ReplaceAllString(detail, "-MODE"))
		seen[role] = append(seen[role], row)
	}
	if strings.Join(seen["admin"], "\n") != strings.Join(seen["database"], "\n") || len(seen["admin"]) < 10 {
		t.Fatalf("audit rows differ\nconsole:\n%s\ndatabase mode:\n%s", strings.Join(seen["admin"], "\n"),
			strings.Join(seen["database"], "\n"))
	}
}
