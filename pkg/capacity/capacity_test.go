package capacity

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func measured() Measured {
	return Measured{
		Tasks: 4, VideoMinutes: 8, WallSeconds: 100, Cores: 2, OtherCores: 0.5,
		Steps: []Step{
			{Name: "asr", CPUSecondsPerMinute: 12, PeakMB: 100, StatementsPerTask: 9, BrokerPerTask: 4, SecondsPerMessage: 7},
			{Name: "mux_video", CPUSecondsPerMinute: 6, PeakMB: 130, StatementsPerTask: 7, BrokerPerTask: 2, SecondsPerMessage: 40},
		},
	}
}

var target = Target{HoursPerDay: 1440, CoresPerReplica: 1, Utilisation: 0.5, DrainSeconds: 60, MemoryHeadroom: 1.5}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// 1440 hours a day is one minute of video a second; tasks are 2 minutes
// long, so half a task a second.
func TestModelByHand(t *testing.T) {
	p, err := Model(measured(), target)
	if err != nil {
		t.Fatal(err)
	}
	if !near(p.TasksPerSecond, 0.5) {
		t.Fatalf("tasks/s %v, want 0.5", p.TasksPerSecond)
	}
	// asr: 12 cores busy, 0.5 core of work per replica → 24 replicas;
	// 100 MB × 1.5 = 150 → 192 Mi; 60 s ÷ 7 s = 8 messages.
	want := []StepPlan{
		{Name: "asr", Cores: 12, Replicas: 24, CPUMilli: 1000, MemoryMi: 192, QueueLength: 8, BrokerPerSec: 2, StatementsSec: 4.5},
		{Name: "mux_video", Cores: 6, Replicas: 12, CPUMilli: 1000, MemoryMi: 256, QueueLength: 1, BrokerPerSec: 1, StatementsSec: 3.5},
	}
	for i, w := range want {
		if p.Steps[i] != w {
			t.Errorf("step %d: %+v, want %+v", i, p.Steps[i], w)
		}
	}
	if !near(p.BrokerPerSecond, 3) || !near(p.StatementsPerSecond, 8) {
		t.Errorf("broker %v/s, statements %v/s, want 3 and 8", p.BrokerPerSecond, p.StatementsPerSecond)
	}
}

// At least one replica and a threshold of one message, however small the load.
func TestModelFloors(t *testing.T) {
	p, err := Model(measured(), Target{HoursPerDay: 0.001, CoresPerReplica: 0.25, Utilisation: 1, DrainSeconds: 1, MemoryHeadroom: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Steps {
		if s.Replicas != 1 || s.QueueLength != 1 || s.CPUMilli != 250 {
			t.Errorf("%+v: want 1 replica, queue length 1, 250m", s)
		}
	}
}

// The workload took 8 × (12 + 6) = 144 CPU-s: 72 s on 2 cores, 96 s on
// the 1.5 left by others; measured 100 s → −4 %.
func TestPredictByHand(t *testing.T) {
	p, err := Predict(measured())
	if err != nil {
		t.Fatal(err)
	}
	if !near(p.AllCores, 72) || !near(p.Shared, 96) || !near(p.Measured, 100) || !near(p.Error, -0.04) {
		t.Fatalf("%+v, want 72, 96, 100, -0.04", p)
	}
}

func TestBadInput(t *testing.T) {
	m := measured()
	m.Steps[1].SecondsPerMessage = 0
	if _, err := Model(m, target); err == nil {
		t.Error("a step without seconds per message: no error")
	}
	if _, err := Predict(Measured{}); err == nil {
		t.Error("an empty run: no error")
	}
	bad := target
	bad.Utilisation = 1.2
	if _, err := Model(measured(), bad); err == nil {
		t.Error("utilisation 1.2: no error")
	}
}

// The checked-in deploy/capacity.json's plan and prediction are what the
// model makes of its measured figures: editing the plan (and the overlay
// with it) without a measurement fails.
func TestCheckedInPlan(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "capacity.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f File
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("deploy/capacity.json: %v", err)
	}
	plan, err := Model(f.Measured, f.Plan.Target)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plan, f.Plan) {
		t.Errorf("deploy/capacity.json plans\n%+v\nthe model makes of its measured figures\n%+v", f.Plan, plan)
	}
	pred, err := Predict(f.Measured)
	if err != nil {
		t.Fatal(err)
	}
	if pred != f.Prediction {
		t.Errorf("deploy/capacity.json predicts %+v, the model %+v", f.Prediction, pred)
	}
}
