package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// dashboardFile is the Grafana dashboard, shipped as a ConfigMap by the
// monitoring component.
var dashboardFile = filepath.Join("k8s", "components", "monitoring", "dubflow-dashboard.json")

// externalMetrics are read by the rules and the dashboard but exported by
// Prometheus itself (up) or kube-state-metrics (kube_*), not by dubflow.
var externalMetrics = []*regexp.Regexp{regexp.MustCompile(`^up$`), regexp.MustCompile(`^kube_[a-z_]+$`)}

// grafanaDashboard is the part of Grafana's dashboard model the tests read.
type grafanaDashboard struct {
	Title  string         `json:"title"`
	UID    string         `json:"uid"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) (*grafanaDashboard, []byte) {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return &d, raw
}

// TestDashboard: the production overlay ships the dashboard as a
// ConfigMap for Grafana's sidecar; its panels do not overlap, every query
// parses (promtool checks them as recording rules), and it shows what an
// operator watches: queue depth, consumers, throughput, step durations,
// errors, dead letters, reconciler re-drives, paused steps and busy
// workers.
func TestDashboard(t *testing.T) {
	d, raw := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard has no uid or title")
	}
	r := render(t, "production")
	cm := r.configMap("dubflow-grafana-dashboard")
	if cm == nil || cm.Labels["grafana_dashboard"] != "1" || cm.Data["dubflow-dashboard.json"] != string(raw) {
		t.Errorf("production: no ConfigMap dubflow-grafana-dashboard labelled grafana_dashboard=1 holding %s", dashboardFile)
	}
	checkPanelLayout(t, d.Panels)

	exprs := dashboardExprs(d)
	rules := map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": recordingRules(exprs)}}}
	out, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, dir, "check", "rules", "dashboard.yaml")

	all := strings.Join(exprs, "\n")
	for _, want := range []string{"dubflow_queue_messages", "dubflow_queue_consumers", "dubflow_step_messages_total",
		"dubflow_step_duration_seconds_bucket", "dubflow_dead_letters_total", "dubflow_reconciler_redrives_total",
		"dubflow_step_paused", "dubflow_worker_busy_consumers"} {
		if !slices.Contains(metricNames(all), want) {
			t.Errorf("the dashboard has no panel on %s", want)
		}
	}
}

func checkPanelLayout(t *testing.T, panels []grafanaPanel) {
	t.Helper()
	ids := map[int]bool{}
	for i, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range panels[:i] {
			h := q.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q and %q overlap", q.Title, p.Title)
			}
		}
	}
}

func dashboardExprs(d *grafanaDashboard) []string {
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

func recordingRules(exprs []string) []map[string]string {
	var rules []map[string]string
	for i, e := range exprs {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:query_%d", i), "expr": e})
	}
	return rules
}

// TestMonitoringReadsExportedMetrics: every metric the alerts and the
// dashboard read is exported by some service (or by Prometheus and
// kube-state-metrics): a renamed metric fails here, not silently in
// production.
func TestMonitoringReadsExportedMetrics(t *testing.T) {
	exported := exportedMetricNames(t)
	d, _ := readDashboard(t)
	sources := map[string][]string{"dashboard": dashboardExprs(d)}
	rule := render(t, "production").prometheusRules[0]
	for _, g := range rule.Spec.Groups {
		for _, rl := range g.Rules {
			sources["alert "+rl.Alert] = append(sources["alert "+rl.Alert], rl.Expr)
		}
	}
	for src, exprs := range sources {
		for _, e := range exprs {
			for _, m := range metricNames(e) {
				if !metricKnown(m, exported) {
					t.Errorf("%s reads %s, which no code under pkg/ or services/ exports (query %s)", src, m, e)
				}
			}
		}
	}
}

func metricKnown(m string, exported map[string]bool) bool {
	if exported[m] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(m, suffix); ok && exported[base] {
			return true
		}
	}
	for _, re := range externalMetrics {
		if re.MatchString(m) {
			return true
		}
	}
	return false
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
		"group_right", "inf", "nan"}
)

// metricNames returns the metric names a PromQL expression selects:
// identifiers outside label matchers, ranges and grouping clauses that are
// neither functions, aggregations nor keywords.
func metricNames(expr string) []string {
	e := promString.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRange.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || slices.Contains(promKeywords, strings.ToLower(name)) {
			continue
		}
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // the unit of a number such as 1e3
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

var (
	goOpts      = regexp.MustCompile(`(?s)prometheus\.(?:Counter|Gauge|Histogram|Summary)Opts\{(.*?)\}`)
	goField     = regexp.MustCompile(`\b(Namespace|Subsystem|Name):\s*"([a-zA-Z0-9_:]*)"`)
	goNameConst = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([a-z][a-z0-9_:]*)"`)
	goNewDesc   = regexp.MustCompile(`prometheus\.NewDesc\(\s*("([a-z0-9_:]+)"|[A-Za-z_][A-Za-z0-9_.]*)`)
	goOpsNew    = regexp.MustCompile(`\bops\.(?:Counters?|Histograms)\(\s*[A-Za-z_][A-Za-z0-9_.]*\s*,\s*"([a-z][a-z0-9_:]*)"`)
)

// exportedMetricNames scans the Go sources under pkg/ and services/
// (tests excluded) for the metrics they declare: *Opts literals with
// Namespace, Subsystem and Name, pkg/ops's Counter/Counters/Histograms with a literal
// name, and prometheus.NewDesc with a literal or a constant name.
func exportedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	consts := map[string]string{}
	var descs []string
	for _, dir := range []string{"pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(repoRoot(t), dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range goOpts.FindAllSubmatch(raw, -1) {
				f := map[string]string{}
				for _, kv := range goField.FindAllSubmatch(m[1], -1) {
					f[string(kv[1])] = string(kv[2])
				}
				if name := joinMetricName(f["Namespace"], f["Subsystem"], f["Name"]); name != "" {
					out[name] = true
				}
			}
			for _, m := range goOpsNew.FindAllSubmatch(raw, -1) {
				out[string(m[1])] = true
			}
			for _, m := range goNameConst.FindAllSubmatch(raw, -1) {
				consts[string(m[1])] = string(m[2])
			}
			for _, m := range goNewDesc.FindAllSubmatch(raw, -1) {
				descs = append(descs, string(m[1]))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range descs {
		if s, ok := strings.CutPrefix(d, `"`); ok {
			out[strings.TrimSuffix(s, `"`)] = true
		} else if v, ok := consts[d[strings.LastIndex(d, ".")+1:]]; ok {
			out[v] = true
		}
	}
	return out
}

func joinMetricName(namespace, subsystem, name string) string {
	if name == "" {
		return ""
	}
	var parts []string
	for _, p := range []string{namespace, subsystem, name} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "_")
}

// TestMetricNames: the PromQL scanner finds the selected metrics and
// nothing else, so the exported-metrics check cannot pass by missing them.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (step) (rate(dubflow_step_messages_total{outcome=~"a|b"}[15m])) / sum(rate(x_total[5m])) > 0.25`: {"dubflow_step_messages_total", "x_total"},
		`histogram_quantile(0.95, sum by (le, step) (rate(dubflow_step_duration_seconds_bucket[5m])))`:           {"dubflow_step_duration_seconds_bucket"},
		`max by (queue) (dubflow_queue_consumers{queue=~"task\\.(asr|tts)"}) == 0 and on (queue) up`:             {"dubflow_queue_consumers", "up"},
		`absent(dubflow_queue_messages) or vector(0) * 1e3`:                                                      {"dubflow_queue_messages"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %v, want %v", expr, got, want)
		}
	}
}
