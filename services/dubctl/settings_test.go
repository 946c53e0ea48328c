package main

import (
	"context"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"strings"
	"testing"
)

// TestConfigInBothModes: dubctl config get prints the same settings in
// both modes, set refuses a bad value with the same text and exit code in
// both (the console's and the database's words), and a good one is
// stored and audited by either door.
func TestConfigInBothModes(t *testing.T) {
	e := setup(t)
	m := &modes{e: e, console: startConsole(t, e)}

	all := m.sameJSON(t, 0, nil, "config", "get", "--json").([]any)
	if len(all) < 9 {
		t.Fatalf("config get --json: %d settings", len(all))
	}
	one := m.sameJSON(t, 0, nil, "config", "get", "monitoring.metrics_retention_days", "--json").(map[string]any)
	if one["value"] != "30" || one["updatedBy"] != "console (default)" {
		t.Errorf("retention as the console seeded it: %v", one)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"set", "queue.central_batch_size", "5"}, cli.ExitUsage, "queue.central_batch_size 5: want 10..200"},
		{[]string{"set", "monitoring.metrics_retention_days", "91"}, cli.ExitUsage, "monitoring.metrics_retention_days 91: want 7..90"},
		{[]string{"set", "queue.service_reservation_timeout", "ten"}, cli.ExitUsage, `queue.service_reservation_timeout "ten": want a number`},
		{[]string{"set", "queue.nothing", "5"}, cli.ExitFailed, `no such setting "queue.nothing" (one of queue.central_batch_size,`},
		{[]string{"get", "queue.nothing"}, cli.ExitFailed, `no such setting "queue.nothing" (one of queue.central_batch_size,`},
		{[]string{"set", "queue.central_batch_size"}, cli.ExitUsage, "accepts 2 arg(s)"},
	} {
		res := m.both(t, append([]string{"config"}, c.args...)...)
		for _, mode := range modeNames {
			if r := res[mode]; r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%s mode: config %v: exit %d %q, want %d and %q", mode, c.args, r.code, r.stderr, c.code, c.want)
			}
		}
	}

	for mode, value := range map[string]string{"database": "80", "console": "90"} {
		m.use(t, mode)
		out, stderr, code := run(t, "config", "set", "queue.central_batch_size", value)
		if code != 0 || out != "queue.central_batch_size = "+value+" (running services take it within 5s)\n" {
			t.Fatalf("%s mode: set: exit %d %q %q", mode, code, out, stderr)
		}
		out, _, code = run(t, "config", "get", "queue.central_batch_size")
		if code != 0 || !strings.Contains(out, "queue.central_batch_size  "+value) || !strings.Contains(out, "Seeded from QUEUE_PROCESS_BATCH_SIZE") {
			t.Errorf("%s mode: get after set: exit %d\n%s", mode, code, out)
		}
	}
	var roles []string
	rows, err := e.db.Pool.Query(context.Background(), `SELECT role || ' ' || outcome FROM console_audit
		WHERE action = 'config' AND outcome = 'ok' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		_ = rows.Scan(&r)
		roles = append(roles, r)
	}
	rows.Close()
	if len(roles) != 2 {
		t.Errorf("audited changes %v, want one by each door", roles)
	}
}
