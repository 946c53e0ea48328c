package main

import (
	"context"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/media"
)

// TestSubmitIdempotencyKeyInBothModes: in each mode, submit run twice
// with one --idempotency-key prints one task and creates one; the key with
// another submission is refused; a key that is not one is a usage error.
func TestSubmitIdempotencyKeyInBothModes(t *testing.T) {
	e := setup(t)
	m := &modes{e: e, console: startConsole(t, e)}
	video := sample(t, media.SampleSpeech)
	tasks := func() int {
		var n int
		if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tasks`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, mode := range modeNames {
		m.use(t, mode)
		before := tasks()
		first, stderr, code := run(t, "submit", "--input", video, "--target", "es", "--idempotency-key", "k-"+mode)
		if code != 0 {
			t.Fatalf("%s mode: submit: exit %d: %s", mode, code, stderr)
		}
		again, stderr, code := run(t, "submit", "--input", video, "--target", "es", "--idempotency-key", "k-"+mode)
		if code != 0 || again != first {
			t.Fatalf("%s mode: submit again: exit %d, printed %q, want %q: %s", mode, code, again, first, stderr)
		}
		if n := tasks() - before; n != 1 {
			t.Fatalf("%s mode: two submits with one key made %d tasks, want 1", mode, n)
		}
		_, stderr, code = run(t, "submit", "--input", video, "--target", "ca", "--idempotency-key", "k-"+mode)
		if code != 1 || !strings.Contains(stderr, "used in the last 24 hours for a different request") {
			t.Errorf("%s mode: another submission with the key: exit %d: %s", mode, code, stderr)
		}
		_, stderr, code = run(t, "submit", "--input", video, "--idempotency-key", "with space")
		if code != 2 || !strings.Contains(stderr, "Idempotency-Key") {
			t.Errorf("%s mode: a bad key: exit %d: %s, want a usage error", mode, code, stderr)
		}
	}
}
