package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// monitoringGroup is the Prometheus Operator's API group.
const monitoringGroup = "monitoring.coreos.com"

// prometheusRule is the part of monitoring.coreos.com/v1 PrometheusRule
// dubflow uses; decoded strictly, so a misspelt field fails.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace,omitempty"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec ruleSpec `json:"spec"`
}

// ruleSpec is a Prometheus rule file: what promtool checks.
type ruleSpec struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

func decodePrometheusRule(t *testing.T, overlay string, gvk schema.GroupVersionKind, doc []byte) *prometheusRule {
	t.Helper()
	if gvk.Kind != "PrometheusRule" || gvk.Version != "v1" {
		t.Fatalf("%s: %s is not checked by these tests", overlay, gvk)
	}
	var r prometheusRule
	if err := yaml.UnmarshalStrict(doc, &r); err != nil {
		t.Fatalf("%s: PrometheusRule: %v", overlay, err)
	}
	return &r
}

// promtool runs promtool through scripts/promtool.sh (which installs
// Debian's prometheus package when promtool is missing).
func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot(t), "scripts", "promtool.sh")}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlerts: the production overlay carries the PrometheusRule; its rules
// pass `promtool check rules` and the unit tests in testdata/alerts_test.yaml
// (`promtool test rules`); it alerts on what operators must hear about, and
// every dubflow metric it names is one the code exports.
func TestAlerts(t *testing.T) {
	r := render(t, "production")
	if len(r.prometheusRules) != 1 {
		t.Fatalf("production: %d PrometheusRules, want 1", len(r.prometheusRules))
	}
	rule := r.prometheusRules[0]
	if rule.Metadata.Namespace != namespace {
		t.Errorf("PrometheusRule/%s: namespace %q, want %q", rule.Metadata.Name, rule.Metadata.Namespace, namespace)
	}
	spec, err := yaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, dir, "check", "rules", "rules.yaml")
	promtool(t, dir, "test", "rules", "alerts_test.yaml")

	var exprs bytes.Buffer
	for _, g := range rule.Spec.Groups {
		for _, rl := range g.Rules {
			exprs.WriteString(rl.Expr + "\n")
			if rl.Alert != "" && rl.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity label", rl.Alert)
			}
			// Every alert is exercised by a unit test.
			if rl.Alert != "" && !bytes.Contains(tests, []byte("alertname: "+rl.Alert+"\n")) {
				t.Errorf("alert %s has no promtool unit test in testdata/alerts_test.yaml", rl.Alert)
			}
		}
	}
	for _, want := range []string{"dubflow_dead_letters_total", "dubflow_reconciler_actions_total", "dubflow_step_wait_seconds_bucket",
		"dubflow_dispatcher_stuck_entries", `up{job="` + metricsService + `"}`, "kube_deployment_status_replicas_available"} {
		if !strings.Contains(exprs.String(), want) {
			t.Errorf("no alert on %s (DLQ growing, stuck tasks, dispatcher stuck entries, workers down)", want)
		}
	}
	// The dubflow_* metrics the alerts read are exported by the code.
	exported := exportedMetricNames(t)
	for _, m := range slices.Compact(slices.Sorted(slices.Values(regexp.MustCompile(`dubflow_[a-z_]+`).FindAllString(exprs.String(), -1)))) {
		if !metricKnown(m, exported) {
			t.Errorf("alerts read %s, which no code under pkg/ or services/ exports", m)
		}
	}
}
