// Package capacity turns what a measured run of the dubbing chain cost each
// step (CPU-seconds and peak memory per minute of video, Postgres
// statements and broker messages per task, seconds per message) into a
// deployment for a target volume: replicas, CPU and memory requests and the
// KEDA queue-depth threshold of every step, and the broker and database
// load at that volume. It also predicts the wall time of the measured
// workload on the machine that ran it, to check the model against the
// measurement.
package capacity

import (
	"errors"
	"fmt"
	"math"
)

// Step is one step's measured figures.
type Step struct {
	Name string `json:"name"`
	// CPUSecondsPerMinute is the CPU time of the step's worker and every
	// child it ran (ffmpeg, pocketsphinx, apertium, espeak-ng) per minute
	// of video dubbed.
	CPUSecondsPerMinute float64 `json:"cpuSecondsPerMinute"`
	// PeakMB is the peak proportional set size of the worker and its
	// children while the workload ran, in MiB.
	PeakMB float64 `json:"peakMB"`
	// StatementsPerTask and BrokerPerTask are the Postgres statements and
	// broker messages (published + settled) the step cost per task.
	StatementsPerTask float64 `json:"statementsPerTask"`
	BrokerPerTask     float64 `json:"brokerPerTask"`
	// SecondsPerMessage is the mean wall time of one delivery of the step
	// (an attempt in task_steps), from its start to its end.
	SecondsPerMessage float64 `json:"secondsPerMessage"`
}

// Measured is a run of the workload.
type Measured struct {
	Tasks        int     `json:"tasks"`
	VideoMinutes float64 `json:"videoMinutes"`
	WallSeconds  float64 `json:"wallSeconds"`
	Cores        int     `json:"cores"`
	// OtherCores is the mean number of this machine's cores busy with
	// processes outside the workload while it ran (a shared machine).
	OtherCores float64 `json:"otherCores"`
	Steps      []Step  `json:"steps"`
}

// Target is the volume to plan for and how to size the replicas.
type Target struct {
	HoursPerDay     float64 `json:"hoursPerDay"`
	CoresPerReplica float64 `json:"coresPerReplica"`
	// Utilisation is the share of its requested CPU a replica is planned
	// to use on average (the rest absorbs bursts).
	Utilisation float64 `json:"utilisation"`
	// DrainSeconds is how long a backlog of one KEDA threshold per replica
	// may take to drain.
	DrainSeconds float64 `json:"drainSeconds"`
	// MemoryHeadroom multiplies the measured peak into the request.
	MemoryHeadroom float64 `json:"memoryHeadroom"`
}

// StepPlan is one step's deployment at the target.
type StepPlan struct {
	Name          string  `json:"name"`
	Cores         float64 `json:"cores"` // mean cores busy at the target
	Replicas      int     `json:"replicas"`
	CPUMilli      int     `json:"cpuMilli"`
	MemoryMi      int     `json:"memoryMi"`
	QueueLength   int     `json:"queueLength"` // KEDA QueueLength value
	BrokerPerSec  float64 `json:"brokerPerSecond"`
	StatementsSec float64 `json:"statementsPerSecond"`
}

// Plan is the deployment at the target.
type Plan struct {
	Target              Target     `json:"target"`
	TasksPerSecond      float64    `json:"tasksPerSecond"`
	Steps               []StepPlan `json:"steps"`
	BrokerPerSecond     float64    `json:"brokerPerSecond"`
	StatementsPerSecond float64    `json:"statementsPerSecond"`
}

// Validate rejects figures the model cannot use.
func (m Measured) Validate() error {
	if m.Tasks <= 0 || m.VideoMinutes <= 0 || m.Cores <= 0 || len(m.Steps) == 0 {
		return fmt.Errorf("capacity: measured run needs tasks, video minutes, cores and steps (got %d, %v, %d, %d)",
			m.Tasks, m.VideoMinutes, m.Cores, len(m.Steps))
	}
	for _, s := range m.Steps {
		if s.CPUSecondsPerMinute <= 0 || s.PeakMB <= 0 || s.SecondsPerMessage <= 0 {
			return fmt.Errorf("capacity: step %q: CPU %v s/min, peak %v MB, %v s/message: each must be > 0",
				s.Name, s.CPUSecondsPerMinute, s.PeakMB, s.SecondsPerMessage)
		}
	}
	return nil
}

func (t Target) validate() error {
	if t.HoursPerDay <= 0 || t.CoresPerReplica <= 0 || t.DrainSeconds <= 0 || t.MemoryHeadroom < 1 ||
		t.Utilisation <= 0 || t.Utilisation > 1 {
		return errors.New("capacity: target needs hours per day, cores per replica and drain seconds > 0, " +
			"utilisation in (0, 1] and memory headroom ≥ 1")
	}
	return nil
}

// Model plans the deployment of the measured steps at the target.
func Model(m Measured, t Target) (Plan, error) {
	if err := m.Validate(); err != nil {
		return Plan{}, err
	}
	if err := t.validate(); err != nil {
		return Plan{}, err
	}
	minutesPerSecond := t.HoursPerDay * 60 / 86400
	minutesPerTask := m.VideoMinutes / float64(m.Tasks)
	p := Plan{Target: t, TasksPerSecond: minutesPerSecond / minutesPerTask}
	for _, s := range m.Steps {
		cores := s.CPUSecondsPerMinute * minutesPerSecond
		sp := StepPlan{
			Name:          s.Name,
			Cores:         cores,
			Replicas:      max(1, int(math.Ceil(cores/(t.CoresPerReplica*t.Utilisation)))),
			CPUMilli:      int(math.Round(t.CoresPerReplica * 1000)),
			MemoryMi:      roundUp(s.PeakMB*t.MemoryHeadroom, 64),
			QueueLength:   max(1, int(math.Floor(t.DrainSeconds/s.SecondsPerMessage))),
			BrokerPerSec:  s.BrokerPerTask * p.TasksPerSecond,
			StatementsSec: s.StatementsPerTask * p.TasksPerSecond,
		}
		p.BrokerPerSecond += sp.BrokerPerSec
		p.StatementsPerSecond += sp.StatementsSec
		p.Steps = append(p.Steps, sp)
	}
	return p, nil
}

func roundUp(x float64, unit int) int {
	return int(math.Ceil(x/float64(unit))) * unit
}

// Prediction is the model's wall time for the measured workload on the
// machine that ran it.
type Prediction struct {
	// AllCores is the workload's CPU time over every core of the machine.
	AllCores float64 `json:"allCoresSeconds"`
	// Shared is the same over the cores left by the machine's other
	// processes (Cores − OtherCores, at least one).
	Shared float64 `json:"sharedSeconds"`
	// Measured is the wall time the run took.
	Measured float64 `json:"measuredSeconds"`
	// Error is Shared ÷ Measured − 1.
	Error float64 `json:"error"`
}

// Predict is the CPU-bound wall time of the measured workload: the CPU
// time it took, over the cores it had.
func Predict(m Measured) (Prediction, error) {
	if err := m.Validate(); err != nil {
		return Prediction{}, err
	}
	var cpu float64
	for _, s := range m.Steps {
		cpu += s.CPUSecondsPerMinute * m.VideoMinutes
	}
	p := Prediction{
		AllCores: cpu / float64(m.Cores),
		Shared:   cpu / math.Max(1, float64(m.Cores)-m.OtherCores),
		Measured: m.WallSeconds,
	}
	if m.WallSeconds > 0 {
		p.Error = p.Shared/m.WallSeconds - 1
	}
	return p, nil
}

// File is what `make capacity` writes to deploy/capacity.json: the
// measured figures, the plan made of them (the production overlay's
// requests and KEDA thresholds follow it) and the prediction of the run.
type File struct {
	Measured   Measured   `json:"measured"`
	Plan       Plan       `json:"plan"`
	Prediction Prediction `json:"prediction"`
}
