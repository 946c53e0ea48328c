package history

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// TestReadQueryRefusesWhatIsNotAsked: an unknown step or series, or a
// since of no known form, is a 400; since is held to the retention; no
// series is every series.
func TestReadQueryRefusesWhatIsNotAsked(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"step=nope", "series=nope", "since=yesterdayish", "series=tasks_done,nope"} {
		v, _ := url.ParseQuery(q)
		_, err := readQuery(v, time.Hour)
		if ae, ok := apierr.As(err); !ok || ae.Status != http.StatusBadRequest {
			t.Errorf("%s: %v, want a 400", q, err)
		}
	}
	hq, err := readQuery(url.Values{"since": {"48h"}}, 24*time.Hour)
	if err != nil || time.Since(hq.since) > 24*time.Hour+time.Minute || !hq.every || len(hq.series) != len(Names()) {
		t.Fatalf("since=48h, kept 24h: %+v %v; want a day back and every series", hq, err)
	}
}

// TestAProjectReadsItsOwnSeries: a project's token reads the per-project
// series only (all of them when none is asked).
func TestAProjectReadsItsOwnSeries(t *testing.T) {
	t.Parallel()
	hq := historyQuery{every: true}
	if err := projectHistory(&hq, "acme"); err != nil || strings.Join(hq.series, ",") != strings.Join(projectSeries, ",") {
		t.Fatalf("every series for a project: %v %v", hq.series, err)
	}
	hq = historyQuery{series: []string{"project_tasks_done", "queue_depth"}}
	if ae, ok := apierr.As(projectHistory(&hq, "acme")); !ok || ae.Status != http.StatusForbidden {
		t.Fatalf("queue_depth for a project: %v, want a 403", ae)
	}
}

// TestReadFromPrometheus: with a Prometheus, its series are read from it
// at the step of the span, NaN dropped, the lines sorted and kept to the
// step asked.
func TestReadFromPrometheus(t *testing.T) {
	t.Parallel()
	var asked []string
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Query().Get("step"))
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[
			{"metric":{"queue":"task.tts"},"values":[[1700000000,"3"],[1700000015,"NaN"],[1700000030,"4"]]},
			{"metric":{"queue":"task.asr"},"values":[[1700000000,"1"]]}]}}`)
	}))
	defer prom.Close()
	rd := Reader{PrometheusURL: prom.URL, Retention: func() time.Duration { return 30 * 24 * time.Hour }}
	rep, err := rd.Read(context.Background(), url.Values{"series": {"queue_depth"}, "since": {"6h"}, "step": {"tts"}}, "")
	if err != nil || rep.Source != "prometheus" || len(rep.Series) != 1 {
		t.Fatalf("report %+v %v", rep, err)
	}
	if l := rep.Series[0].Lines; len(l) != 1 || l[0].Key != "task.tts" || len(l[0].Points) != 2 || l[0].Points[1] != [2]float64{1700000030000, 4} {
		t.Fatalf("lines %+v, want task.tts's two numbers", l)
	}
	if len(asked) != 1 || asked[0] != "60" {
		t.Fatalf("asked steps %v, want 60 s for 6 hours", asked)
	}
	prom.Close()
	_, err = rd.Read(context.Background(), url.Values{"series": {"queue_depth"}}, "")
	if ae, ok := apierr.As(err); !ok || ae.Status != http.StatusServiceUnavailable || strings.Contains(ae.Message, "127.0.0.1") {
		t.Fatalf("Prometheus gone: %v, want a 503 that names no address", err)
	}
}
