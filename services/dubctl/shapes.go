package main

import (
	"errors"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/audit"
	"github.com/dubflow/dubflow/pkg/compensation"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/google/uuid"
)

// The shapes dubctl prints with --json that are the console's answers
// beyond pkg/view's and pkg/dlq's: both modes fill them, so both print the
// same JSON.

// taskTimeline is GET /api/tasks/{id}/timeline: every event of a task in
// order (view.Timeline).
type taskTimeline struct {
	TaskID uuid.UUID    `json:"taskId"`
	Events []view.Event `json:"events"`
}

// retried is POST /api/tasks/{id}/retry: what a retry republished (the
// shared retry's answer, retry.Task).
type retried = retry.Retried

// requeued is POST /api/compensations/requeue: the tasks re-driven.
type requeued struct {
	Requeued []requeuedTask `json:"requeued"`
}

// requeuedTask is one compensating task re-driven.
type requeuedTask struct {
	TaskID          uuid.UUID `json:"taskId"`
	Status          string    `json:"status"`
	MissingSegments []int     `json:"missingSegments"`
	Attempt         int       `json:"attempt"`
}

// requeuedOf is what compensation.Requeue re-drove.
func requeuedOf(tasks []compensation.Task) requeued {
	out := requeued{Requeued: make([]requeuedTask, 0, len(tasks))}
	for _, t := range tasks {
		out.Requeued = append(out.Requeued, requeuedTask{TaskID: t.TaskID, Status: t.Status, MissingSegments: t.Missing,
			Attempt: t.Attempt})
	}
	return out
}

// workerList is GET /api/workers: every worker process heard from in the
// last hour (pkg/worker's heartbeats), with what it runs now.
type workerList struct {
	Workers          []worker.Process `json:"workers"`
	HeartbeatSeconds float64          `json:"heartbeatSeconds"`
	LostAfterSeconds float64          `json:"lostAfterSeconds"`
}

// workersOf is the list of procs.
func workersOf(procs []worker.Process) workerList {
	if procs == nil {
		procs = []worker.Process{}
	}
	return workerList{Workers: procs, HeartbeatSeconds: worker.HeartbeatInterval.Seconds(),
		LostAfterSeconds: worker.LostAfter.Seconds()}
}

// listFilter is a task list's filter: the read model's, and since and
// until as given (the console reads them itself; they were checked here).
type listFilter struct {
	view.Filter
	since, until string
}

// auditFilter is the audit log's filter, with since and until as given.
type auditFilter struct {
	audit.Filter
	since, until string
}

// now is the time relative filters (--since 2h) count back from.
var now = time.Now

// timeRange reads --since and --until (dlq.ParseSince's forms: an RFC 3339
// time, a date, or a duration back from now), nil when not given; the
// error reads as the console's for ?since= and ?until=.
func timeRange(since, until string) (*time.Time, *time.Time, error) {
	var out [2]*time.Time
	for i, v := range []string{since, until} {
		if v == "" {
			continue
		}
		t, err := dlq.ParseSince(v, now())
		if err != nil {
			if i == 1 {
				err = errors.New(strings.Replace(err.Error(), "since", "until", 1))
			}
			return nil, nil, usageError(err)
		}
		out[i] = &t
	}
	return out[0], out[1], nil
}
