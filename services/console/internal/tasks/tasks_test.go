package tasks

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// TestTaskFilterReadsTheListsParameters: a project's token lists its own
// project whatever it asks; includeChildren is true or false; a bad limit
// is 400.
func TestTaskFilterReadsTheListsParameters(t *testing.T) {
	t.Parallel()
	r := route.WithPrincipal(httptest.NewRequest("GET", "/api/tasks?project=other&includeChildren=true&q=+clip+&limit=5", nil),
		auth.Principal{Role: auth.RoleAdmin, Name: "p1/ops", Project: "p1"})
	f, err := taskFilter(r)
	if err != nil || f.Project != "p1" || !f.WithChildren || f.Q != "clip" || f.Limit != 5 {
		t.Errorf("%+v %v", f, err)
	}
	for _, q := range []string{"includeChildren=yes", "limit=0", "since=whenever"} {
		_, err := taskFilter(httptest.NewRequest("GET", "/api/tasks?"+q, nil))
		if ae, ok := apierr.As(err); !ok || ae.Status != http.StatusBadRequest {
			t.Errorf("%s: %v, want 400", q, err)
		}
	}
}

// TestMediaTypeIsNeverRunnable: a stored audio or video type is kept,
// anything else is the file name's media type.
func TestMediaTypeIsNeverRunnable(t *testing.T) {
	t.Parallel()
	for _, c := range [][3]string{{"video/webm", "source.mp4", "video/webm"}, {"text/html", "x.wav", "audio/wav"},
		{"", "source.mp4", "video/mp4"}, {"application/octet-stream", "dub.html", "video/mp4"}} {
		if got := mediaType(c[0], c[1]); got != c[2] {
			t.Errorf("%s %s: %s, want %s", c[0], c[1], got, c[2])
		}
	}
}

// TestRoutesAreTheTasks: every route is under /api/tasks, the commands
// audited admin routes.
func TestRoutesAreTheTasks(t *testing.T) {
	t.Parallel()
	for _, rt := range (Room{}).Routes() {
		if !strings.HasPrefix(rt.Path, "/api/tasks") || (rt.Method == "POST") != (rt.Access == route.Admin && rt.Audit != "") {
			t.Errorf("%+v", rt)
		}
	}
}
