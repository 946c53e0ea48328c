package main

import (
	"net/http"

	"github.com/dubflow/dubflow/pkg/worker"
)

// listWorkers answers GET /api/workers: every worker process heard from in
// the last hour (pkg/worker's heartbeats), with what it runs now.
func (s *server) listWorkers(w http.ResponseWriter, r *http.Request) {
	procs, err := worker.Processes(r.Context(), s.pool)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if procs == nil {
		procs = []worker.Process{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": procs,
		"heartbeatSeconds": worker.HeartbeatInterval.Seconds(), "lostAfterSeconds": worker.LostAfter.Seconds()})
}
