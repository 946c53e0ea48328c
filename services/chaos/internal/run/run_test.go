package run

import (
	"testing"
)

func TestServiceEnvPassesSettings(t *testing.T) {
	t.Setenv("STUCK_TASK_SECONDS", "42")
	t.Setenv("ASR_CHUNK_SECONDS", "10")
	t.Setenv("UNRELATED", "x")
	env := serviceEnv(map[string]string{"AMQP_URL": "amqp://proxy/"}, "/tmp/x")
	if env["STUCK_TASK_SECONDS"] != "42" || env["ASR_CHUNK_SECONDS"] != "10" || env["UNRELATED"] != "" ||
		env["AMQP_URL"] != "amqp://proxy/" || env["TMPDIR"] != "/tmp/x" || env["RECONCILE_INTERVAL_SECONDS"] != "5" {
		t.Fatalf("env: %v", env)
	}
}
