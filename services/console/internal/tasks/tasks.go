// Package tasks is the API's routes of tasks: the list, one task's detail
// and what it is made of (its realtime status, lines, versions, timeline,
// source video and dub audio), all answered from the read model (pkg/view,
// which dubctl prints too), and the operators' commands on a task (cancel,
// retry, re-dub), each committed with its messages.
package tasks

import (
	"context"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Room serves the task routes.
type Room struct {
	Pool    *pgxpool.Pool
	Objects *blob.Store
	// Signer presigns the download links browsers fetch, valid for
	// LinkExpiry (CONSOLE_PRESIGN_SECONDS).
	Signer     *blob.Presigner
	LinkExpiry time.Duration
	Log        zerolog.Logger
	// Commit commits a command with the messages it stages.
	Commit route.Committer
	// Retry runs a failed or cancelled task again in tx, with speaker when
	// not "" (pkg/retry's Task, which stands on the step runtime, above the
	// rooms in the import graph: main passes it): what it replayed and the
	// outbox rows to publish. RetryRefused is its refusal of a task that
	// cannot be retried (retry.ErrRefused).
	Retry        func(ctx context.Context, tx pgx.Tx, id uuid.UUID, speaker string) (any, []int64, error)
	RetryRefused error
	Fail         route.Fail
}

// Routes are GET and POST /api/tasks' list, and the routes of one task,
// /api/tasks/{id}...: reads, and the operators' commands (audited).
func (s Room) Routes() []route.Route {
	read := func(sub string, h http.HandlerFunc) route.Route {
		return route.Route{Method: "GET", Path: "/api/tasks/{id}" + sub, Access: route.Reader, Handle: h}
	}
	command := func(action string, h http.HandlerFunc) route.Route {
		return route.Route{Method: "POST", Path: "/api/tasks/{id}/" + action, Access: route.Admin, Audit: action, Handle: h}
	}
	return []route.Route{
		{Method: "GET", Path: "/api/tasks", Access: route.Reader, Handle: s.listTasks},
		read("", s.getTask),
		read("/realtime-status", s.realtimeStatus),
		read("/segments", s.taskSegments()),
		read("/versions", s.taskVersions()),
		read("/timeline", s.taskTimeline()),
		read(view.SourceVideoPath, s.serveTaskFile(sourceVideoKey)),
		read(view.DubAudioPath, s.serveTaskFile(dubAudioKey)),
		read(StreamPath, s.streamMaster),
		read("/stream/{file}", s.streamFile),
		command("cancel", taskCommand(s, http.StatusOK, s.cancelTask)),
		command("retry", taskCommand(s, http.StatusOK, s.retryWith)),
		command("redub", taskCommand(s, http.StatusAccepted, s.redubTask)),
	}
}
