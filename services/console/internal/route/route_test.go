package route

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/google/uuid"
)

// TestRequestParts: a task id must be a UUID, a limit 1..most (def when
// absent), and since or until what parse reads, each refused with 400
// naming the parameter; the principal set on a request is read back.
func TestRequestParts(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/api/tasks/x?limit=0", nil)
	r.SetPathValue("id", "not-a-uuid")
	if _, err := TaskID(r); apierr.StatusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "task id") {
		t.Errorf("task id: %v", err)
	}
	id := uuid.New()
	r.SetPathValue("id", id.String())
	if got, err := TaskID(r); got != id || err != nil {
		t.Errorf("task id %s: %s %v", id, got, err)
	}
	if _, err := Limit(r, 50, 100); apierr.StatusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "want 1..100") {
		t.Errorf("limit 0: %v", err)
	}
	if n, err := Limit(httptest.NewRequest("GET", "/", nil), 50, 100); n != 50 || err != nil {
		t.Errorf("no limit: %d %v, want 50", n, err)
	}
	day := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	parse := func(s string, _ time.Time) (time.Time, error) {
		if s == "bad" {
			return time.Time{}, errors.New("since \"bad\": want a time")
		}
		return day, nil
	}
	if since, until, err := TimeRange("2026-01-02", "", parse); err != nil || !since.Equal(day) || until != nil {
		t.Errorf("since only: %v %v %v", since, until, err)
	}
	if _, _, err := TimeRange("", "bad", parse); apierr.StatusOf(err) != http.StatusBadRequest || !strings.HasPrefix(err.Error(), "until") {
		t.Errorf("bad until: %v, want 400 naming until", err)
	}
	p := auth.Principal{Name: "ops", Role: auth.RoleAdmin, Project: "p1"}
	if got := PrincipalOf(WithPrincipal(r, p)); got != p || ProjectOf(WithPrincipal(r, p)) != "p1" {
		t.Errorf("principal %+v, want %+v", got, p)
	}
}

// TestJSONIsNotCached: an answer is JSON with its status, never cached.
func TestJSONIsNotCached(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	JSON(w, http.StatusCreated, map[string]int{"n": 1})
	if w.Code != http.StatusCreated || w.Header().Get("Content-Type") != "application/json" ||
		w.Header().Get("Cache-Control") != "no-store" || w.Body.String() != "{\"n\":1}\n" {
		t.Errorf("%d %v %q", w.Code, w.Header(), w.Body.String())
	}
}
