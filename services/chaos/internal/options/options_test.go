package options

import (
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
	"io"
	"testing"
	"time"
)

func noEnv(string) string { return "" }

func TestOptionsDefaults(t *testing.T) {
	o, err := Parse(nil, func(k string) string {
		if k == "DUBFLOW_FIXTURES" {
			return "/fixtures"
		}
		return ""
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Tasks != 200 || o.Languages != 10 || o.Seed != 0 || o.Duration != 8*time.Minute || o.Settle != 15*time.Minute || o.Keep || o.Fixtures != "/fixtures" ||
		o.cluster || o.Nodes() != 1 {
		t.Fatalf("defaults: %+v", o)
	}
}

func TestOptionsFlags(t *testing.T) {
	o, err := Parse([]string{"-tasks", "7", "-languages", "3", "-seed", "99", "-duration", "1m", "-settle", "2m", "-keep", "-cluster", "-fixtures", "/f"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Tasks != 7 || o.Languages != 3 || o.Seed != 99 || o.Duration != time.Minute || o.Settle != 2*time.Minute || !o.Keep || o.Fixtures != "/f" ||
		!o.cluster || o.Nodes() != 3 {
		t.Fatalf("flags: %+v", o)
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, args := range [][]string{
		{"-tasks", "0", "-fixtures", "/f"},
		{"-languages", "-1", "-fixtures", "/f"},
		{"-duration", "1s", "-fixtures", "/f"},
		{"-settle", "0s", "-fixtures", "/f"},
		{"-fixtures", "/f", "extra"},
		{"-seed", "-1", "-fixtures", "/f"},
		{}, // no fixtures
	} {
		if _, err := Parse(args, noEnv, io.Discard); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}

func TestOptionsHA(t *testing.T) {
	o, err := Parse([]string{"-ha", "-async", "-max-pause", "20s", "-fixtures", "/f"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Ha || !o.Async || o.MaxPause != 20*time.Second || o.Nodes() != stack.HARabbitNodes {
		t.Fatalf("flags: %+v", o)
	}
	if o, _ := Parse([]string{"-fixtures", "/f"}, noEnv, io.Discard); o.Ha || o.Async || o.MaxPause != 30*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	for _, args := range [][]string{
		{"-ha", "-cluster", "-fixtures", "/f"},
		{"-async", "-fixtures", "/f"},
		{"-ha", "-max-pause", "-1s", "-fixtures", "/f"},
	} {
		if _, err := Parse(args, noEnv, io.Discard); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}
