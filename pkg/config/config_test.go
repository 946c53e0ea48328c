package config_test

import (
	"strings"
	"testing"

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
