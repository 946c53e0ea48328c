package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
)

func TestLoadAppliesDefaultsAndOverrides(t *testing.T) {
	var c config.Common
	if err := config.Load(map[string]string{"S3_BUCKET": "media", "STEP_MAX_RETRIES": "5"}, &c); err != nil {
		t.Fatal(err)
	}
	if c.AMQPURL != "amqp://guest:guest@localhost:5672/" || c.S3.Bucket != "media" || c.MaxRetries != 5 || c.DefaultTargetLanguage != "es" {
		t.Fatalf("config = %+v", c)
	}
}

// TestOpsAddrDefaultsToLoopback: the unauthenticated probes and metrics of
// a plain binary are reachable from its own machine only; deployments set
// OPS_ADDR themselves (deploy's tests check they do).
func TestOpsAddrDefaultsToLoopback(t *testing.T) {
	var c config.Common
	if err := config.Load(map[string]string{}, &c); err != nil {
		t.Fatal(err)
	}
	if c.OpsAddr != "127.0.0.1:8081" {
		t.Fatalf("OPS_ADDR default %q, want 127.0.0.1:8081", c.OpsAddr)
	}
	if err := config.Load(map[string]string{"OPS_ADDR": ":9100"}, &c); err != nil || c.OpsAddr != ":9100" {
		t.Fatalf("OPS_ADDR=:9100 read as %q (%v)", c.OpsAddr, err)
	}
}

func TestValidateNamesEveryBadSetting(t *testing.T) {
	var c config.Common
	err := config.Load(map[string]string{"AMQP_URL": "http://x", "WORKER_CONCURRENCY": "0", "STEP_MAX_RETRIES": "99",
		"LOG_FORMAT": "xml"}, &c)
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, name := range []string{"AMQP_URL", "WORKER_CONCURRENCY", "STEP_MAX_RETRIES", "LOG_FORMAT"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	if err := config.Load(map[string]string{"STEP_LEASE_SECONDS": "soon"}, &c); err == nil {
		t.Fatal("unparsable number accepted")
	}
}

func TestRedactHidesThePassword(t *testing.T) {
	if got := config.Redact("amqp://user:secret@host:5672/"); strings.Contains(got, "secret") {
		t.Fatalf("Redact = %q", got)
	}
}

func TestLimitsDefaultAndValidate(t *testing.T) {
	var l config.Limits
	if err := config.Load(map[string]string{"MAX_VIDEO_SECONDS": "60"}, &l); err != nil {
		t.Fatal(err)
	}
	if l.MaxDuration().Seconds() != 60 || l.MaxVideoBytes != 4<<30 || l.MaxAudioBytes != 1<<30 || l.MaxClipBytes != 64<<20 {
		t.Fatalf("limits = %+v", l)
	}
	err := config.Load(map[string]string{"MAX_VIDEO_SECONDS": "0", "MAX_CLIP_BYTES": "-1"}, &l)
	if err == nil || !strings.Contains(err.Error(), "MAX_VIDEO_SECONDS") || !strings.Contains(err.Error(), "MAX_CLIP_BYTES") {
		t.Fatalf("invalid limits: %v", err)
	}
}

// A step timeout must end a minute before the broker's consumer timeout:
// the old defaults (1800 s against RabbitMQ's 30 minutes) are refused.
func TestStepTimeoutStaysBelowTheBrokerConsumerTimeout(t *testing.T) {
	var c config.Common
	if err := config.Load(map[string]string{}, &c); err != nil {
		t.Fatal(err)
	}
	if c.BrokerConsumerTimeoutSeconds != 1800 {
		t.Fatalf("BROKER_CONSUMER_TIMEOUT_SECONDS default %d, want RabbitMQ's 1800", c.BrokerConsumerTimeoutSeconds)
	}
	if err := c.CheckStepTimeout("asr", 1740*time.Second); err != nil {
		t.Errorf("1740 s refused: %v", err)
	}
	for _, tc := range []struct {
		step    string
		seconds int
	}{{"asr", 1800}, {"mux_video", 1741}, {"tts", 3600}} {
		err := c.CheckStepTimeout(tc.step, time.Duration(tc.seconds)*time.Second)
		if err == nil {
			t.Errorf("%s %d s accepted against a consumer timeout of 1800 s", tc.step, tc.seconds)
			continue
		}
		for _, want := range []string{config.StepTimeoutVar(tc.step), "BROKER_CONSUMER_TIMEOUT_SECONDS=1800", "at most 1740"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	if got := config.StepTimeoutVar("mux_video"); got != "TIMEOUT_MUX_SECONDS" {
		t.Errorf("StepTimeoutVar(mux_video) = %s", got)
	}
	// A raised consumer timeout admits a longer step; 0 means the broker has none.
	if err := config.Load(map[string]string{"BROKER_CONSUMER_TIMEOUT_SECONDS": "3600"}, &c); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckStepTimeout("asr", 1800*time.Second); err != nil {
		t.Errorf("1800 s refused against 3600 s: %v", err)
	}
	if err := config.Load(map[string]string{"BROKER_CONSUMER_TIMEOUT_SECONDS": "0"}, &c); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckStepTimeout("asr", 24*time.Hour); err != nil {
		t.Errorf("no consumer timeout, yet refused: %v", err)
	}
	if err := config.Load(map[string]string{"BROKER_CONSUMER_TIMEOUT_SECONDS": "30"}, &c); err == nil ||
		!strings.Contains(err.Error(), "BROKER_CONSUMER_TIMEOUT_SECONDS") {
		t.Errorf("a 30 s consumer timeout accepted: %v", err)
	}
}

// A step worker's configuration embeds TimeoutSeconds with its variable
// and default: Timeout is that many seconds, and CheckTimeout names the
// variable StepTimeoutVar gives the step.
func TestTimeoutSecondsReadsTheStepsVariable(t *testing.T) {
	var c struct {
		config.TimeoutSeconds `env:"TIMEOUT_MUX_SECONDS" envDefault:"900"`
	}
	if err := config.Load(map[string]string{}, &c); err != nil {
		t.Fatal(err)
	}
	if c.Timeout() != 900*time.Second || c.CheckTimeout("mux_video") != nil {
		t.Fatalf("default: Timeout() = %v, CheckTimeout = %v", c.Timeout(), c.CheckTimeout("mux_video"))
	}
	if err := config.Load(map[string]string{"TIMEOUT_MUX_SECONDS": "0"}, &c); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckTimeout("mux_video"); err == nil || err.Error() != "TIMEOUT_MUX_SECONDS 0: want at least 1" {
		t.Fatalf("TIMEOUT_MUX_SECONDS=0: CheckTimeout = %v", err)
	}
	if err := config.Load(map[string]string{"TIMEOUT_MUX_SECONDS": "soon"}, &c); err == nil {
		t.Fatal("unparsable timeout accepted")
	}
}
