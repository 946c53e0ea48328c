package main

import (
	"strings"
	"testing"

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
