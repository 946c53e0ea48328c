package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
)

// ASR_CHUNK_NICE reaches the Chunker, 5 by default, and 0..19 only.
func TestChunkNiceIsReadAndChecked(t *testing.T) {
	base := map[string]string{"AMQP_URL": "amqp://guest:guest@localhost:5672/", "DATABASE_URL": "postgres://localhost/x"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for k, v := range base {
			m[k] = v
		}
		return m
	}
	var c Config
	if err := config.Load(base, &c); err != nil {
		t.Fatal(err)
	}
	if c.Speech().ASRChunkNice != 5 {
		t.Errorf("default ASR_CHUNK_NICE %d, want 5", c.Speech().ASRChunkNice)
	}
	c = Config{}
	if err := config.Load(with("ASR_CHUNK_NICE", "5"), &c); err != nil || c.Speech().ASRChunkNice != 5 {
		t.Errorf("ASR_CHUNK_NICE=5: %d (%v)", c.Speech().ASRChunkNice, err)
	}
	c = Config{}
	if err := config.Load(with("ASR_CHUNK_NICE", "20"), &c); err == nil || !strings.Contains(err.Error(), "ASR_CHUNK_NICE 20: want 0..19") {
		t.Errorf("ASR_CHUNK_NICE=20: %v", err)
	}
}

// ASR_STALL_SECONDS reaches the recogniser as its Stall, 60 s by default,
// and 1..3600 only.
func TestStallSecondsIsReadAndChecked(t *testing.T) {
	env := func(extra ...string) map[string]string {
		m := map[string]string{"AMQP_URL": "amqp://guest:guest@localhost:5672/", "DATABASE_URL": "postgres://localhost/x"}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	var c Config
	if err := config.Load(env(), &c); err != nil || c.Speech().ASRStall != time.Minute {
		t.Errorf("default ASR_STALL_SECONDS: %s (%v), want 1m0s", c.Speech().ASRStall, err)
	}
	c = Config{}
	if err := config.Load(env("ASR_STALL_SECONDS", "5"), &c); err != nil || c.Speech().ASRStall != 5*time.Second {
		t.Errorf("ASR_STALL_SECONDS=5: %s (%v)", c.Speech().ASRStall, err)
	}
	c = Config{}
	if err := config.Load(env("ASR_STALL_SECONDS", "0"), &c); err == nil || !strings.Contains(err.Error(), "ASR_STALL_SECONDS 0: want 1..3600") {
		t.Errorf("ASR_STALL_SECONDS=0: %v", err)
	}
}
