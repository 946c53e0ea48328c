package auditlog

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dubflow/dubflow/services/console/internal/answer"
)

// TestOutcomeIsTheAnswersCode: an audited answer's outcome is "ok", the
// error's "code: message", or the bare status when the body says neither;
// a submitted task's id becomes the target.
func TestOutcomeIsTheAnswersCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status        int
		body, outcome string
		task          string
	}{
		{http.StatusAccepted, `{"taskId":"t-1"}`, "ok", "t-1"},
		{http.StatusConflict, `{"code":"conflict","message":"done already"}`, "conflict: done already", ""},
		{http.StatusBadGateway, `<html>`, "502 Bad Gateway", ""},
	} {
		rec := &statusRecorder{answer.Recorder{ResponseWriter: httptest.NewRecorder(), Limit: 4096}}
		rec.WriteHeader(c.status)
		_, _ = rec.Write([]byte(c.body))
		if rec.outcome() != c.outcome || rec.taskID() != c.task {
			t.Errorf("%d %s: outcome %q, task %q; want %q, %q", c.status, c.body, rec.outcome(), rec.taskID(), c.outcome, c.task)
		}
	}
}

// TestNotesOutsideTheAuditGoNowhere: a handler that notes when it is not
// audited does not fail; an action not in Actions is refused when the
// route is built.
func TestNotesOutsideTheAuditGoNowhere(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/", nil)
	Note(r, "k", 1)
	NoteTarget(r, "x")
	NoteActor(r, "n", "admin")
	Skip(r)
	defer func() {
		if recover() == nil {
			t.Error("an unknown action was accepted")
		}
	}()
	Log{}.Audited("no-such-action", func(http.ResponseWriter, *http.Request) {})
}
