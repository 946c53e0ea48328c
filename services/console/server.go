package main

import (
	"context"
	_ "embed"
	"net/http"
	"slices"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/retry"
	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/dubflow/dubflow/services/console/internal/deadletters"
	"github.com/dubflow/dubflow/services/console/internal/events"
	"github.com/dubflow/dubflow/services/console/internal/gate"
	"github.com/dubflow/dubflow/services/console/internal/history"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
	"github.com/dubflow/dubflow/services/console/internal/projects"
	"github.com/dubflow/dubflow/services/console/internal/ratelimit"
	"github.com/dubflow/dubflow/services/console/internal/review"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/dubflow/dubflow/services/console/internal/session"
	"github.com/dubflow/dubflow/services/console/internal/submit"
	"github.com/dubflow/dubflow/services/console/internal/system"
	"github.com/dubflow/dubflow/services/console/internal/tasks"
	"github.com/dubflow/dubflow/services/console/internal/waiting"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// server is the console: what its rooms (internal/…) share, and their
// routes behind the gate (internal/gate).
type server struct {
	cfg     *Config
	log     zerolog.Logger
	pool    *pgxpool.Pool
	objects *blob.Store
	// signer presigns what browsers fetch and upload (Config.presigner).
	signer *blob.Presigner
	pub    outbox.Publisher
	queues inspect.Inspector
	events *events.Hub
	auth   *auth.Auth
	logins *ratelimit.Limiter
	// page serves the web page for every path not under /api/.
	page http.Handler
	// refused counts the refused requests for the audit (internal/auditlog).
	refused auditlog.Refusals
	// settings are the run-time settings in force (nil: the defaults).
	settings *setting.Watch
}

// routes lists every API route, room by room; openapi.json describes each.
func (s *server) routes() []route.Route {
	commit := route.Committer{Pool: s.pool, Pub: s.pub, Log: s.log}
	return slices.Concat(
		[]route.Route{{Method: "GET", Path: "/api/openapi.json", Access: route.Public, Handle: contract.Serve(openapiDoc)}},
		session.Room{Auth: s.auth, Pool: s.pool, Log: s.log, Logins: s.logins, Refused: &s.refused, Fail: s.fail}.Routes(),
		s.intake().Routes(),
		tasks.Room{Pool: s.pool, Objects: s.objects, Signer: s.signer, LinkExpiry: s.cfg.Presign(), Log: s.log, Commit: commit,
			Retry: func(ctx context.Context, tx pgx.Tx, id uuid.UUID, speaker string) (any, []int64, error) {
				res, err := retry.Task(ctx, tx, id, retry.Options{Speaker: speaker, By: "console"})
				return res, res.Outbox, err
			}, RetryRefused: retry.ErrRefused, Fail: s.fail}.Routes(),
		s.events.Routes(s.fail),
		review.Room{Pool: s.pool, Objects: s.objects, Log: s.log, Commit: commit, BatchSize: s.cfg.TranslateBatchSize,
			Fail: s.fail}.Routes(),
		deadletters.Room{Pool: s.pool, Pub: s.pub, Log: s.log, Fail: s.fail}.Routes(),
		system.Room{Pool: s.pool, Objects: s.objects, Queues: s.queues, Audit: s.auditLog(), Fail: s.fail,
			Fleet: system.Fleet{Registry: system.RegistryOf(s.pool, worker.Processes, worker.Pauses, worker.SetPaused, worker.ErrUnknownStep),
				Heartbeat: worker.HeartbeatInterval, LostAfter: worker.LostAfter, PausePoll: worker.PausePoll},
			StuckAfter: func() time.Duration { return s.settings.Seconds(setting.StuckTaskThreshold) }}.Routes(),
		[]route.Route{history.Reader{Pool: s.pool, PrometheusURL: s.cfg.PrometheusURL, Retention: s.retention}.Route(s.fail)},
		waiting.Proxy{Fail: s.fail, Dispatcher: func() (string, string) { return s.cfg.DispatcherURL, s.cfg.DispatcherToken }}.Routes(),
		projects.Room{Pool: s.pool, Fail: s.fail}.Routes(),
	)
}

// Handler serves the API's routes through the gate, and the page.
func (s *server) Handler() http.Handler {
	if s.auth.Store == nil && s.pool != nil {
		s.auth.Store = s.pool // the projects' tokens
	}
	return s.gate().Handler(s.routes())
}

// gate is the server's door (internal/gate).
func (s *server) gate() gate.Gate {
	return gate.Gate{Auth: s.auth, Pool: s.pool, Log: s.log, Contract: apiContract, Audit: s.auditLog(),
		BodyLimit: s.intake().BodyLimit, Page: s.page}
}

// fail answers err (gate.Gate.Fail).
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) { s.gate().Fail(w, r, err) }

// intake is the room that starts tasks (internal/submit).
func (s *server) intake() submit.Room {
	return submit.Room{Pool: s.pool, Objects: s.objects, Signer: s.signer, Pub: s.pub, Log: s.log, Limits: s.cfg.Limits,
		DefaultSource: s.cfg.DefaultSourceLanguage, DefaultTarget: s.cfg.DefaultTargetLanguage, LinkExpiry: s.cfg.Presign(),
		Fail: s.fail}
}

// auditLog is the server's audit (internal/auditlog).
func (s *server) auditLog() auditlog.Log {
	return auditlog.Log{Pool: s.pool, Log: s.log, Refused: &s.refused,
		Who: func(r *http.Request) (string, string) { p := route.PrincipalOf(r); return p.Name, p.Role }}
}

// sampler is the server's metric history sampler, its clock now.
func (s *server) sampler(now func() time.Time) history.Sampler {
	return history.Sampler{Pool: s.pool, Log: s.log, Retention: s.retention, Now: now,
		Queues: func(ctx context.Context) (map[string]int, error) { return inspect.Ready(ctx, s.queues) }}
}

// retention is how long the metric history is kept (monitoring.metrics_retention_days in force).
func (s *server) retention() time.Duration {
	return 24 * time.Hour * time.Duration(s.settings.Int(setting.MetricsRetentionDays))
}

// openapiDoc is the API's OpenAPI document, written by hand; a test keeps
// its paths and methods equal to the routes served.
//
//go:embed openapi.json
var openapiDoc []byte

// apiContract is openapi.json's, read once (the tests check the embedded document).
var apiContract = contract.MustParse(openapiDoc)
