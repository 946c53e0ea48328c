package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
)

// modes switches dubctl between database mode and console mode (the real
// console binary on the same database, broker and bucket).
type modes struct {
	e       *env
	console string
}

// names of the two modes, in the order they run.
var modeNames = []string{"database", "console"}

// use points dubctl at mode.
func (m *modes) use(t *testing.T, mode string) {
	t.Helper()
	if mode == "console" {
		t.Setenv("DATABASE_URL", "")
		t.Setenv("AMQP_URL", "")
		t.Setenv("CONSOLE_URL", m.console)
		t.Setenv("DUBFLOW_API_TOKEN", consoleToken)
		return
	}
	t.Setenv("DATABASE_URL", m.e.db.URL)
	t.Setenv("AMQP_URL", m.e.amqpURL)
	t.Setenv("CONSOLE_URL", "")
}

// outcome is one run of dubctl.
type outcome struct {
	stdout, stderr string
	code           int
}

// both runs the command in each mode; args may hold "{dir}", a directory
// of the mode's own.
func (m *modes) both(t *testing.T, args ...string) map[string]outcome {
	t.Helper()
	out := map[string]outcome{}
	for _, mode := range modeNames {
		m.use(t, mode)
		dir := filepath.Join(t.TempDir(), mode)
		a := make([]string, len(args))
		for i, s := range args {
			a[i] = strings.ReplaceAll(s, "{dir}", dir)
		}
		o, e, c := run(t, a...)
		out[mode] = outcome{strings.ReplaceAll(o, dir, "{dir}"), e, c}
	}
	return out
}

// sameJSON runs the command in both modes, checks that both exit with
// want and print the same bytes (with the names in replace set aside), and
// returns the JSON decoded. Presigned links are signed as of the start of
// a window (blob.LinkWindow): when the two runs fell in two windows, they
// run again, in one window then.
func (m *modes) sameJSON(t *testing.T, want int, replace map[string]string, args ...string) any {
	t.Helper()
	for try := 0; ; try++ {
		res := m.both(t, args...)
		var texts []string
		for _, mode := range modeNames {
			r := res[mode]
			if r.code != want {
				t.Fatalf("%s mode: dubctl %v: exit %d, want %d\n%s\n%s", mode, args, r.code, want, r.stdout, r.stderr)
			}
			text := r.stdout
			for from, to := range replace {
				text = strings.ReplaceAll(text, from, to)
			}
			texts = append(texts, text)
		}
		if texts[0] != texts[1] {
			if try == 0 && !slices.Equal(signedAt.FindAllString(texts[0], -1), signedAt.FindAllString(texts[1], -1)) {
				continue // a link window turned between the two runs
			}
			t.Fatalf("dubctl %v prints different JSON\ndatabase mode:\n%s\nconsole mode:\n%s", args, texts[0], texts[1])
		}
		var v any
		if err := json.Unmarshal([]byte(texts[0]), &v); err != nil {
			t.Fatalf("dubctl %v printed no JSON: %v\n%s", args, err, texts[0])
		}
		return v
	}
}

// signedAt finds the signing times of presigned links.
var signedAt = regexp.MustCompile(`X-Amz-Date=[0-9TZ]+`)

// put stores body under key.
func (e *env) put(t *testing.T, key, body string) {
	t.Helper()
	if _, err := e.bucket.Client.PutObject(context.Background(), e.bucket.Name, key, strings.NewReader(body),
		int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// exec runs SQL on the test database.
func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// doneTask stores a task that was dubbed, as mux_video leaves one: its
// video and the source, target and bilingual subtitles, listed in its
// result; parent names the parent of a child task.
func (e *env) doneTask(t *testing.T, id uuid.UUID, lang string, parent *uuid.UUID) {
	t.Helper()
	keys := wire.DefaultKeys(id)
	dir := "outputs/" + id.String() + "/final."
	subs := map[string]string{"en": dir + "en.srt", lang: dir + lang + ".srt", "bilingual": dir + lang + "-en.srt"}
	res, _ := json.Marshal(map[string]any{"output_video_key": keys.OutputVideo, "subtitles": subs})
	e.put(t, keys.OutputVideo, "video of "+lang)
	for l, k := range subs {
		e.put(t, k, "1\n00:00:00,000 --> 00:00:01,000\n"+l+"\n")
	}
	e.exec(t, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key, output_video_key,
		result, parent_task_id, trace_id) VALUES ($1, 'done', 'en', $2, $3, $4, $5, $6, 'trace-modes')`,
		id, lang, keys.SourceVideo, keys.OutputVideo, res, parent)
	for _, s := range wire.Pipeline {
		e.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, worker, started_at, finished_at)
			VALUES ($1, $2, 1, 'succeeded', 'w', now() - interval '2 s', now() - interval '1 s')`, id, s)
	}
	e.exec(t, `INSERT INTO segments (task_id, idx, start_ms, end_ms, src_text, mt_text, tts_audio_key, tts_params_json)
		VALUES ($1, 0, 0, 900, 'hello', 'hola', 'tts/a.wav', '{"slot_ms": 900}'),
		       ($1, 3, 1000, 1900, 'bye', 'adiós', 'tts/b.wav', NULL)`, id)
}

// TestEveryCommandInBothModes runs each command in database mode and
// through the console and compares what they print: the same bytes of
// JSON, presigned links included. wait saves the same files (the bilingual
// subtitles too); a parent's redub is refused naming its children; a bad
// input is refused alike. (The operators' actions: TestEveryActionInBothModes.)
func TestEveryCommandInBothModes(t *testing.T) {
	e := setup(t)
	m := &modes{e: e, console: startConsole(t, e)}

	single := uuid.New()
	e.doneTask(t, single, "es", nil)
	e.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, worker, started_at, finished_at, error)
		VALUES ($1, 'extract_audio', 2, 'failed', 'w', now() - interval '3 s', now() - interval '2 s', 'download: timeout')`, single)
	parent := uuid.New()
	e.exec(t, `INSERT INTO tasks (id, status, source_language, target_language, targets, source_video_key,
		output_video_key, trace_id) VALUES ($1, 'done', 'en', 'es', '{es,ca}', $2, $3, 'trace-modes')`,
		parent, wire.DefaultKeys(parent).SourceVideo, wire.DefaultKeys(parent).OutputVideo)
	for _, s := range []string{"extract_audio", "asr"} {
		e.exec(t, `INSERT INTO task_steps (task_id, step, attempt, status, worker, started_at, finished_at)
			VALUES ($1, $2, 1, 'succeeded', 'w', now() - interval '9 s', now() - interval '8 s')`, parent, s)
	}
	es, ca := wire.ChildTaskID(parent, "es"), wire.ChildTaskID(parent, "ca")
	e.doneTask(t, es, "es", &parent)
	e.doneTask(t, ca, "ca", &parent)
	envOf := func(id uuid.UUID) []byte {
		env, _ := wire.New(wire.StepExtractAudio, id, "", wire.ExtractAudio{SourceVideoKey: wire.DefaultKeys(id).SourceVideo,
			OutputAudioKey: wire.DefaultKeys(id).SourceAudio})
		b, _ := env.Marshal()
		return b
	}
	var dl int64
	if err := e.db.Pool.QueryRow(context.Background(), `INSERT INTO dead_letters (message_id, task_id, step, part, attempt,
		error_class, failure_reason, original_message) VALUES ('m-single', $1, 'extract_audio', '', 3, 'transient', 'boom', $2)
		RETURNING id`, single, envOf(single)).Scan(&dl); err != nil {
		t.Fatal(err)
	}

	t.Run("status", func(t *testing.T) {
		// The same links in both modes: signed with the console's settings.
		links := m.sameJSON(t, 0, nil, "status", single.String(), "--json").(map[string]any)["links"].(map[string]any)
		if links["output"] == nil || links["source"] == nil || len(links["subtitles"].([]any)) != 3 {
			t.Errorf("links %v, want the source's, the output's and three subtitles'", links)
		}
		v := m.sameJSON(t, 0, nil, "status", parent.String(), "--json").(map[string]any)
		if v["outputVideoKey"] != "" || len(v["steps"].([]any)) != 2 {
			t.Errorf("parent: output %v, steps %v", v["outputVideoKey"], v["steps"])
		}
		for mode, r := range m.both(t, "status", parent.String()) {
			if r.code != 0 || strings.Contains(r.stdout, "pending") || strings.Contains(r.stdout, wire.DefaultKeys(parent).OutputVideo) ||
				!strings.Contains(r.stdout, es.String()) || !strings.Contains(r.stdout, ca.String()) {
				t.Errorf("%s mode: status of the parent: exit %d\n%s%s", mode, r.code, r.stdout, r.stderr)
			}
		}
	})
	t.Run("list", func(t *testing.T) {
		if l := m.sameJSON(t, 0, nil, "list", "--json", "--limit", "300").([]any); len(l) != 2 {
			t.Errorf("list: %d tasks, want the single task and the parent", len(l))
		}
		m.sameJSON(t, 0, nil, "list", "--json", "--status", "failed")
	})
	t.Run("segments and versions", func(t *testing.T) {
		if s := m.sameJSON(t, 0, nil, "segments", single.String(), "--json").([]any); len(s) != 2 ||
			s[1].(map[string]any)["n"] != float64(2) {
			t.Errorf("segments %v", s)
		}
		if v := m.sameJSON(t, 0, nil, "versions", single.String(), "--json").([]any); len(v) != 1 {
			t.Errorf("versions %v", v)
		}
	})
	t.Run("dlq", func(t *testing.T) {
		m.sameJSON(t, 0, nil, "dlq", "list", "--json")
		m.sameJSON(t, 0, nil, "dlq", "show", fmt.Sprint(dl), "--json")
		// Each mode replays a dead letter of a failed task of its own.
		var printed []string
		for _, mode := range modeNames {
			id := uuid.New()
			e.exec(t, `INSERT INTO tasks (id, status, source_language, target_language, source_video_key, output_video_key, error)
				VALUES ($1, 'failed', 'en', 'es', $2, $3, 'boom')`, id, wire.DefaultKeys(id).SourceVideo, wire.DefaultKeys(id).OutputVideo)
			var lost int64
			if err := e.db.Pool.QueryRow(context.Background(), `INSERT INTO dead_letters (message_id, task_id, step, attempt,
				failure_reason, original_message) VALUES ($1, $2, 'extract_audio', 1, 'boom', $3) RETURNING id`,
				"m-"+mode, id, envOf(id)).Scan(&lost); err != nil {
				t.Fatal(err)
			}
			m.use(t, mode)
			stdout, stderr, code := run(t, "dlq", "replay", fmt.Sprint(lost), "--json")
			if code != 0 {
				t.Fatalf("%s mode: dlq replay: exit %d: %s", mode, code, stderr)
			}
			stdout = strings.ReplaceAll(strings.ReplaceAll(stdout, id.String(), "TASK"), fmt.Sprintf(`"id": %d`, lost), `"id": N`)
			printed = append(printed, stdout)
			if _, stderr, code := run(t, "dlq", "replay", fmt.Sprint(lost)); code == 0 || !strings.Contains(stderr, "already replayed") {
				t.Errorf("%s mode: second replay: exit %d: %s", mode, code, stderr)
			}
		}
		if printed[0] != printed[1] || !strings.Contains(printed[0], `"attempt": 2`) {
			t.Errorf("dlq replay --json:\ndatabase mode %s\nconsole mode %s", printed[0], printed[1])
		}
	})
	t.Run("wait", func(t *testing.T) {
		v := m.sameJSON(t, 0, nil, "wait", single.String(), "--json", "--output", "{dir}/dub.mp4").(map[string]any)
		subs := fmt.Sprint(v["subtitlePaths"])
		for _, want := range []string{"{dir}/dub.en.srt", "{dir}/dub.es.srt", "{dir}/dub.es-en.srt"} {
			if !strings.Contains(subs, want) {
				t.Errorf("wait saved subtitles %s, want %s among them", subs, want)
			}
		}
		v = m.sameJSON(t, 0, nil, "wait", parent.String(), "--json", "--output", "{dir}/dub.mp4").(map[string]any)
		if p := v["outputPaths"].(map[string]any); p["es"] != "{dir}/dub.es.mp4" || p["ca"] != "{dir}/dub.ca.mp4" ||
			!strings.Contains(fmt.Sprint(v["subtitlePaths"]), "{dir}/dub.ca.ca-en.srt") {
			t.Errorf("wait of the parent saved %v and %v", p, v["subtitlePaths"])
		}
		// In text: the files, in either mode, with their content.
		for _, mode := range modeNames {
			m.use(t, mode)
			dir := t.TempDir()
			stdout, stderr, code := run(t, "wait", single.String(), "--output", filepath.Join(dir, "dub.mp4"))
			b, err := os.ReadFile(filepath.Join(dir, "dub.es-en.srt"))
			if code != 0 || err != nil || !strings.Contains(string(b), "bilingual") ||
				!strings.HasSuffix(strings.TrimSpace(stdout), filepath.Join(dir, "dub.mp4")) {
				t.Errorf("%s mode: wait: exit %d, bilingual %q (%v)\n%s%s", mode, code, b, err, stdout, stderr)
			}
		}
	})
	t.Run("redub", func(t *testing.T) {
		for mode, r := range m.both(t, "redub", parent.String(), "--segment", "1", "--text", "otra") {
			if r.code != cli.ExitFailed || !strings.Contains(r.stderr, "es "+es.String()) || !strings.Contains(r.stderr, "ca "+ca.String()) {
				t.Errorf("%s mode: redub of a parent: exit %d, stderr %q; want 1 naming both children", mode, r.code, r.stderr)
			}
		}
		for _, args := range [][]string{{"--segment", "1", "--text", " "}, {"--segment", "0", "--text", "x"}, {"--segment", "9", "--text", "x"}} {
			for mode, r := range m.both(t, append([]string{"redub", single.String()}, args...)...) {
				if r.code != cli.ExitUsage {
					t.Errorf("%s mode: redub %v: exit %d, want %d: %s", mode, args, r.code, cli.ExitUsage, r.stderr)
				}
			}
		}
		// A child is re-dubbed like any task, in either mode: one version each.
		m.use(t, "database")
		if _, stderr, code := run(t, "redub", es.String(), "--segment", "2", "--text", "hasta luego", "--json"); code != 0 {
			t.Fatalf("redub of a child: exit %d: %s", code, stderr)
		}
		v := m.sameJSON(t, 0, nil, "versions", es.String(), "--json").([]any)
		if len(v) != 2 || v[1].(map[string]any)["segment"] != float64(2) {
			t.Errorf("versions after redub of segment 2: %v", v)
		}
	})
	t.Run("submit", func(t *testing.T) {
		video := sample(t, media.SampleSpeech)
		res := m.both(t, "submit", "--input", video, "--source", "en", "--target", "es", "--speaker", "es+f3", "--json")
		// Both are the same task but for its id, trace and times.
		var tasks []map[string]any
		for _, mode := range modeNames {
			r := res[mode]
			var v map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil || v["status"] != "queued" {
				t.Fatalf("%s mode: submit: exit %d (%v)\n%s%s", mode, r.code, err, r.stdout, r.stderr)
			}
			text := strings.ReplaceAll(r.stdout, v["taskId"].(string), "ID")
			_ = json.Unmarshal([]byte(text), &v)
			for _, k := range []string{"traceId", "createdAt", "updatedAt", "links"} {
				delete(v, k)
			}
			tasks = append(tasks, v)
		}
		if !reflect.DeepEqual(tasks[0], tasks[1]) {
			t.Errorf("submit --json differs:\ndatabase mode %v\nconsole mode  %v", tasks[0], tasks[1])
		}
		var before, after int
		_ = e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tasks`).Scan(&before)
		for mode, r := range m.both(t, "submit", "--input", video, "--wait", "--output", video) {
			if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "is the input") {
				t.Errorf("%s mode: submit --output = --input: exit %d, stderr %q", mode, r.code, r.stderr)
			}
		}
		_ = e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tasks`).Scan(&after)
		if after != before {
			t.Errorf("a refused submit created %d task(s)", after-before)
		}
	})
}
