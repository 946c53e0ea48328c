package main

import (
	"context"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"strconv"
	"strings"
	"testing"
)

// dlq list and dlq show name the part of a dead-lettered fanned-out step.
func TestDLQListAndShowNameThePart(t *testing.T) {
	e := setup(t)
	id := insertTask(t, e, view.Failed, "translate: no such mode", "{}")
	var dlID int64
	if err := e.db.Pool.QueryRow(context.Background(), `INSERT INTO dead_letters
		(message_id, task_id, step, part, attempt, error_class, failure_reason, routing_key)
		VALUES ('dl-part', $1, 'translate', 'batch-0f3a', 4, 'permanent', 'no such mode', 'task.translate') RETURNING id`,
		id).Scan(&dlID); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "dlq", "list")
	if code != cli.ExitOK || !strings.Contains(stdout, "PART") || !strings.Contains(stdout, "batch-0f3a") {
		t.Errorf("dlq list: exit %d, stdout %q, stderr %q; want the part", code, stdout, stderr)
	}
	stdout, stderr, code = run(t, "dlq", "show", strconv.FormatInt(dlID, 10))
	if code != cli.ExitOK || !strings.Contains(stdout, "part:") || !strings.Contains(stdout, "batch-0f3a") {
		t.Errorf("dlq show: exit %d, stdout %q, stderr %q; want the part", code, stdout, stderr)
	}
	stdout, _, _ = run(t, "dlq", "list", "--json")
	if !strings.Contains(stdout, `"part": "batch-0f3a"`) && !strings.Contains(stdout, `"part":"batch-0f3a"`) {
		t.Errorf("dlq list --json: %s; want the part", stdout)
	}
}
