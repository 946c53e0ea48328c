// Package system is the routes of the installation as a whole: its health,
// the work queues (paused and resumed by an operator) and the workers that
// consume them, the engines, the run-time settings and the audit log. A
// project's token may call none of them but the health report
// (openapi.json's x-scope).
package system

import (
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Room serves the system's routes.
type Room struct {
	Pool    *pgxpool.Pool
	Objects *blob.Store
	// Queues reads the broker's queues.
	Queues inspect.Inspector
	Fleet  Fleet
	// StuckAfter is monitoring.stuck_task_threshold in force: a queued or
	// running task without progress for so long is stuck.
	StuckAfter func() time.Duration
	// Audit reads the audit log.
	Audit auditlog.Log
	Fail  route.Fail
}

// Fleet is the workers' registry: their heartbeats and the steps paused.
type Fleet struct {
	Registry Registry
	// Heartbeat, LostAfter and PausePoll are pkg/worker's periods: between
	// two heartbeats, before a silent worker is lost, and before every
	// worker sees a pause.
	Heartbeat, LostAfter, PausePoll time.Duration
}

// Routes are the system's routes; pausing, resuming and changing a
// setting are audited.
func (s Room) Routes() []route.Route {
	return []route.Route{
		{Method: "GET", Path: "/api/system/health", Access: route.Reader, Handle: s.health},
		{Method: "GET", Path: "/api/engines", Access: route.Reader, Handle: s.listEngines},
		{Method: "GET", Path: "/api/audit", Access: route.Reader, Handle: s.listAudit},
		{Method: "GET", Path: "/api/queues", Access: route.Reader, Handle: s.listQueues},
		{Method: "POST", Path: "/api/queues/{step}/pause", Access: route.Admin, Audit: "pause", Handle: s.pauseQueue},
		{Method: "POST", Path: "/api/queues/{step}/resume", Access: route.Admin, Audit: "resume", Handle: s.resumeQueue},
		{Method: "GET", Path: "/api/workers", Access: route.Reader, Handle: s.listWorkers},
		{Method: "GET", Path: "/api/config", Access: route.Reader, Handle: s.listSettings},
		{Method: "PUT", Path: "/api/config/{key}", Access: route.Admin, Audit: "config", Handle: s.putSetting},
	}
}
