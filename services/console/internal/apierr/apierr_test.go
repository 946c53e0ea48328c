package apierr

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestAsFindsTheAnswer: an answer is found however deep it is wrapped;
// an internal cause is kept for the log, not put in the answer.
func TestAsFindsTheAnswer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err          error
		status       int
		code, answer string
	}{
		{BadRequest("no"), http.StatusBadRequest, "bad_request", "no"},
		{fmt.Errorf("read: %w", NotFound("gone")), http.StatusNotFound, "not_found", "gone"},
		{Forbidden("csrf", "token"), http.StatusForbidden, "csrf", "token"},
		{UnavailableBecause("try again", errors.New("dial 10.0.0.1:5432")), http.StatusServiceUnavailable, "unavailable", "try again"},
	} {
		ae, ok := As(c.err)
		if !ok || ae.Status != c.status || ae.Code != c.code || ae.Message != c.answer {
			t.Errorf("%v: answer %+v (%v), want %d %s %q", c.err, ae, ok, c.status, c.code, c.answer)
		}
	}
	cause := errors.New("dial 10.0.0.1:5432")
	err := UnavailableBecause("try again", cause)
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "10.0.0.1") {
		t.Errorf("%v: the cause is not kept for the log", err)
	}
	if _, ok := As(errors.New("plain")); ok {
		t.Error("a plain error has an answer")
	}
}

func TestShortCutsLongValues(t *testing.T) {
	t.Parallel()
	if got := Short(strings.Repeat("é", 41)); got != strings.Repeat("é", 40)+"…" {
		t.Errorf("Short: %q", got)
	}
	if got := Short("abc"); got != "abc" {
		t.Errorf("Short(abc): %q", got)
	}
}

// TestStatusOf: an answer's status, also behind a wrapping or a cause
// kept for the log; 0 for an error that carries none.
func TestStatusOf(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]int{NotFound("x"): 404, fmt.Errorf("wrapped: %w", Conflict("x")): 409,
		UnavailableBecause("x", errors.New("dial")): 503, errors.New("plain"): 0} {
		if got := StatusOf(err); got != want {
			t.Errorf("%v: %d, want %d", err, got, want)
		}
	}
}
