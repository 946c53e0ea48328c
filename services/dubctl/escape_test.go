package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestPrintsControlCharactersEscaped: text from people and engines (a
// task's error, a segment's translation, a dead letter's reason, a file
// name) reaches the terminal with its escape sequences and bidirectional
// overrides escaped, in both modes; --json stays JSON with the same
// values.
func TestPrintsControlCharactersEscaped(t *testing.T) {
	e := setup(t)
	m := &modes{e: e, console: startConsole(t, e)}
	id := uuid.New()
	e.doneTask(t, id, "es", nil)
	const evil = "\x1b[2J\x1b]0;owned\x07 evil\u202etxt.exe"
	e.exec(t, `UPDATE tasks SET error = $2, source_file_name = $2 WHERE id = $1`, id, evil)
	e.exec(t, `UPDATE segments SET mt_text = $2, src_text = $2 WHERE task_id = $1`, id, evil)
	e.exec(t, `INSERT INTO dead_letters (message_id, task_id, step, attempt, failure_reason) VALUES ('m', $1, 'asr', 1, $2)`,
		id, evil)
	for _, args := range [][]string{
		{"status", id.String()}, {"segments", id.String()}, {"list"}, {"dlq", "list"}, {"versions", id.String()},
		{"status", id.String(), "--json"}, {"segments", id.String(), "--json"}, {"dlq", "show", "1"},
	} {
		for mode, r := range m.both(t, args...) {
			for _, raw := range []string{"\x1b", "\x07", "\u202e"} {
				if strings.Contains(r.stdout, raw) || strings.Contains(r.stderr, raw) {
					t.Errorf("%s mode: dubctl %v printed %q raw:\n%s%s", mode, args, raw, r.stdout, r.stderr)
				}
			}
			if r.code != 0 {
				t.Errorf("%s mode: dubctl %v: exit %d: %s", mode, args, r.code, r.stderr)
			}
		}
	}
	r := m.both(t, "segments", id.String(), "--json")["console"]
	var segs []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &segs); err != nil || len(segs) == 0 || segs[0].Text != evil {
		t.Fatalf("segments --json: %v %+v\n%s", err, segs, r.stdout)
	}
	if !strings.Contains(m.both(t, "segments", id.String())["database"].stdout, `\u001b[2J\u001b]0;owned\u0007 evil\u202etxt.exe`) {
		t.Error("segments does not show the escaped text")
	}
}
