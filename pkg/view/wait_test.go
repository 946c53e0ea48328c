package view

import (
	"testing"
	"time"
)

// TestWaitOf: a part whose last attempt ended waiting for an engine is
// waiting, its step too, and the task says until when.
func TestWaitOf(t *testing.T) {
	until := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)
	earlier := until.Add(-time.Hour)
	attempts := func(as ...Attempt) []attemptRow {
		var rows []attemptRow
		for _, a := range as {
			rows = append(rows, attemptRow{step: "translate", part: "b0", Attempt: a})
		}
		return rows
	}
	waited := Attempt{Attempt: 1, Status: "failed", WaitReason: "rate_limit", WaitUntil: &earlier}
	waiting := Attempt{Attempt: 2, Status: "failed", WaitReason: "no_quota", WaitUntil: &until}
	s := buildStep("translate", false, []string{"b0"}, attempts(waited, waiting))
	if s.Status != Waiting || s.Parts[0].Status != Waiting {
		t.Fatalf("step %s part %s, want waiting", s.Status, s.Parts[0].Status)
	}
	w := WaitOf([]Step{s})
	if w == nil || w.Message != "waiting for quota until 14:00 UTC" || w.Step != "translate" || !w.Until.Equal(until) {
		t.Fatalf("wait %+v, want quota until 14:00 UTC on translate", w)
	}
	failed := Attempt{Attempt: 3, Status: "failed", Error: "http 500"}
	if s := buildStep("translate", false, []string{"b0"}, attempts(waiting, failed)); s.Status != "failed" || WaitOf([]Step{s}) != nil {
		t.Errorf("a failed attempt after the wait: step %s, want failed and no wait", s.Status)
	}
}
