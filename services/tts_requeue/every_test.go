package main

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
)

// syncBuffer collects the passes' output, safe to read while a pass
// writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With -every, tts_requeue is a long-running service: it re-drives at once,
// serves /readyz and /metrics on OPS_ADDR like every other one, and stops
// cleanly on cancel.
func TestEveryServesOpsEndpointsAndRedrives(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.task(t, "compensating", time.Hour, 3, []int{1}, true, true)
	env := map[string]string{"OPS_ADDR": testenv.FreeAddr(t)}
	for k, v := range f.env {
		env[k] = v
	}
	var out syncBuffer
	stop := testenv.Serve(t, func(ctx context.Context, env map[string]string) error {
		return run(ctx, []string{"-every", "1h"}, env, &out, io.Discard)
	}, env)
	if !testenv.Poll(time.Now().Add(testenv.Within(t, 30*time.Second)), func() bool { return strings.Contains(out.String(), id.String()) }) {
		t.Fatalf("the first pass did not re-drive %s; output %q", id, out.String())
	}
	if err := stop(); err != nil {
		t.Fatalf("run -every after cancel = %v, want nil", err)
	}
	if msgs := f.messages(t); len(msgs) != 1 || msgs[0].TaskID != id {
		t.Errorf("task.tts holds %d messages, want the one re-drive of %s", len(msgs), id)
	}
}
