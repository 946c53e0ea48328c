package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/capacity"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// writeCapacity writes the figures to CAPACITY_OUT, deploy/capacity.json
// by default.
func writeCapacity(tb testing.TB, m capacity.Measured, p capacity.Plan, pred capacity.Prediction) {
	tb.Helper()
	out := os.Getenv("CAPACITY_OUT")
	if out == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			tb.Fatal(err)
		}
		out = filepath.Join(root, "deploy", "capacity.json")
	}
	b, err := json.MarshalIndent(capacity.File{Measured: m, Plan: p, Prediction: pred}, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		tb.Fatal(err)
	}
	fmt.Printf("wrote %s\n", out)
}

// capacityReport is the README's capacity table (markdown) and the
// prediction of the run.
func capacityReport(m capacity.Measured, p capacity.Plan, pred capacity.Prediction) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured: %d tasks, %.1f minutes of video, %.0f s wall on %d cores (%.2f cores busy with other work).\n\n",
		m.Tasks, m.VideoMinutes, m.WallSeconds, m.Cores, m.OtherCores)
	fmt.Fprintf(&b, "At %.0f hours of video a day (%.3f tasks/s of this workload's mix), %.0f core(s) per replica at %.0f %%, "+
		"a backlog drained in %.0f s:\n\n", p.Target.HoursPerDay, p.TasksPerSecond, p.Target.CoresPerReplica,
		100*p.Target.Utilisation, p.Target.DrainSeconds)
	b.WriteString("| step | CPU-s / min of video | peak MB (with children) | statements / task | broker msgs / task | s / message | replicas | CPU request | memory request | KEDA queue length | broker msgs/s | statements/s |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, s := range m.Steps {
		x := p.Steps[i]
		fmt.Fprintf(&b, "| %s | %.1f | %.0f | %.1f | %.1f | %.1f | %d | %dm | %dMi | %d | %.1f | %.1f |\n",
			s.Name, s.CPUSecondsPerMinute, s.PeakMB, s.StatementsPerTask, s.BrokerPerTask, s.SecondsPerMessage,
			x.Replicas, x.CPUMilli, x.MemoryMi, x.QueueLength, x.BrokerPerSec, x.StatementsSec)
	}
	fmt.Fprintf(&b, "| total | | | | | | | | | | %.1f | %.1f |\n\n", p.BrokerPerSecond, p.StatementsPerSecond)
	fmt.Fprintf(&b, "This machine, the workload just run: predicted %.0f s on the %.2f cores left by other work (%.0f s on all %d), "+
		"measured %.0f s: %+.0f %%.\n", pred.Shared, float64(m.Cores)-m.OtherCores, pred.AllCores, m.Cores,
		pred.Measured, 100*pred.Error)
	return b.String()
}
