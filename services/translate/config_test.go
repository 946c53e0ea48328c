package main

import (
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/speech"
)

// TestApertiumPipelinesSetting: APERTIUM_PIPELINES reaches the embedded
// engine (0 = its default, -1 = one apertium process per call) and a value
// below -1 is refused at start.
func TestApertiumPipelinesSetting(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		value string
		want  int
	}{{"", 0}, {"0", 0}, {"3", 3}, {"-1", -1}} {
		environ := map[string]string{}
		if c.value != "" {
			environ["APERTIUM_PIPELINES"] = c.value
		}
		var cfg Config
		if err := config.Load(environ, &cfg); err != nil {
			t.Fatalf("APERTIUM_PIPELINES=%q: %v", c.value, err)
		}
		b, err := cfg.translator()
		if err != nil {
			t.Fatal(err)
		}
		a, ok := b.Engine.(*speech.Apertium)
		if !ok {
			t.Fatalf("engine is %T, want *speech.Apertium", b.Engine)
		}
		if a.Pipelines != c.want {
			t.Errorf("APERTIUM_PIPELINES=%q: engine Pipelines = %d, want %d", c.value, a.Pipelines, c.want)
		}
	}
	var cfg Config
	err := config.Load(map[string]string{"APERTIUM_PIPELINES": "-2"}, &cfg)
	if err == nil || !strings.Contains(err.Error(), "APERTIUM_PIPELINES") {
		t.Errorf("APERTIUM_PIPELINES=-2: err = %v, want an error naming the setting", err)
	}
}
