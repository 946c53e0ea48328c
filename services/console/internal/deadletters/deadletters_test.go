package deadletters

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// TestRequestsAreRead: a dead letter's id is a positive number; a bulk
// filter keeps a project's token to its project's dead letters, and a bad
// one is 400.
func TestRequestsAreRead(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]int{"7": 0, "0": 400, "x": 400} {
		r := httptest.NewRequest("GET", "/api/dead-letters/"+id, nil)
		r.SetPathValue("id", id)
		if _, err := deadLetterID(r); apierr.StatusOf(err) != want {
			t.Errorf("id %s: %v, want %d", id, err, want)
		}
	}
	r := route.WithPrincipal(httptest.NewRequest("POST", "/api/dead-letters/replay", strings.NewReader(`{"step": "tts"}`)),
		auth.Principal{Role: auth.RoleAdmin, Project: "p1"})
	if _, m, err := readBulk(r); err != nil || m.Project != "p1" {
		t.Errorf("bulk filter: %+v %v, want project p1", m, err)
	}
	r = httptest.NewRequest("POST", "/api/dead-letters/replay", strings.NewReader(`{"since": "whenever"}`))
	if _, _, err := readBulk(r); apierr.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("bad since: %v, want 400", err)
	}
}
