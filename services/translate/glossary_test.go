package main

import (
	"context"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
)

// glossary: a task's glossary reaches the embedded engine — "weather" is
// translated "clima" (apertium says "tiempo"), "dubflow" is kept as it is —
// while a task without one translates as before.
func glossary(t *testing.T, s *testenv.Stack) {
	ctx := context.Background()
	texts := []string{"The weather is good in Dubflow.", "I like the weather."}
	with := newTask(s, texts, [][]int{{0, 1}})
	without := newTask(s, texts, [][]int{{0, 1}})
	terms, err := dub.GlossaryJSON([]wire.Term{{Source: "weather", Target: "clima"}, {Source: "dubflow"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, dub.SaveGlossarySQL, with[0].TaskID, terms); err != nil {
		t.Fatal(err)
	}
	s.Publish(with[0])
	s.Publish(without[0])
	got := map[bool][]string{}
	for glossed, env := range map[bool]*wire.Envelope{true: with[0], false: without[0]} {
		s.WaitFor("the batch to succeed", func() bool {
			var n int
			err := s.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM task_steps WHERE task_id = $1 AND step = 'translate'
				AND status = 'succeeded'`, env.TaskID).Scan(&n)
			return err == nil && n == 1
		})
		rows, err := s.DB.Pool.Query(ctx, `SELECT mt_text FROM segments WHERE task_id = $1 ORDER BY idx`, env.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var mt string
			if err := rows.Scan(&mt); err != nil {
				t.Fatal(err)
			}
			got[glossed] = append(got[glossed], mt)
		}
		rows.Close()
	}
	if len(got[true]) != 2 || !strings.Contains(got[true][0], "clima") || !strings.Contains(got[true][0], "Dubflow") ||
		strings.Contains(strings.Join(got[true], " "), "tiempo") || !strings.Contains(got[true][1], "clima") {
		t.Errorf("with the glossary: %q", got[true])
	}
	if len(got[false]) != 2 || !strings.Contains(got[false][0], "tiempo") {
		t.Errorf("without the glossary: %q", got[false])
	}
}
