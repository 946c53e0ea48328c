package auditlog

import (
	"fmt"
	"testing"
	"time"
)

// TestRefusalKeysAreBounded: however many different refusals come within
// a window, at most maxRefusalKeys+1 rows are written for it.
func TestRefusalKeysAreBounded(t *testing.T) {
	t.Parallel()
	var rs Refusals
	now := time.Now()
	for i := range 10 * maxRefusalKeys {
		rs.Note(Refusal{Actor: fmt.Sprint("token-", i), Target: "GET /api/tasks", Outcome: "unauthorized: x", Status: 401}, now, "/api/tasks")
	}
	counts := rs.take()
	total := 0
	for _, c := range counts {
		total += c.n
	}
	if len(counts) != maxRefusalKeys+1 || total != 10*maxRefusalKeys {
		t.Fatalf("%d keys counting %d refusals, want %d keys counting %d", len(counts), total, maxRefusalKeys+1, 10*maxRefusalKeys)
	}
	if len(rs.take()) != 0 {
		t.Fatal("take did not start a new window")
	}
}
