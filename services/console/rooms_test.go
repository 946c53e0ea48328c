package main

import (
	"context"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/deadletters"
	"github.com/dubflow/dubflow/services/console/internal/gate"
	"github.com/dubflow/dubflow/services/console/internal/inspect"
	"github.com/dubflow/dubflow/services/console/internal/session"
	"github.com/dubflow/dubflow/services/console/internal/submit"
	"github.com/dubflow/dubflow/services/console/internal/system"
	"github.com/dubflow/dubflow/services/console/internal/tasks"
	"github.com/dubflow/dubflow/services/console/internal/uploads"
)

// The shapes the API answers, as the rooms (internal/…) name them, under
// the names this package's tests read them by.
type (
	apiError         = apierr.Error
	created          = submit.Created
	upload           = submit.Upload
	sessionView      = session.View
	taskDetail       = view.Task
	taskSummary      = view.Summary
	taskPage         = view.Page
	languagesView    = view.Languages
	links            = view.Links
	deadLetterView   = view.DeadLetter
	compensationView = view.Compensation
	bulkResult       = dlq.BulkResult
	requeueView      = deadletters.Requeued
	realtimeStatus   = tasks.Realtime
	progress         = tasks.Progress
	segmentList      = tasks.SegmentList
	timeline         = tasks.Timeline
	healthReport     = system.HealthReport
	queueView        = system.QueueView
	queueState       = inspect.State
	settingsList     = system.SettingsList
)

// maxTaskJSONBytes bounds the JSON body of POST /api/tasks.
const maxTaskJSONBytes = submit.MaxTaskJSONBytes

// classify is the API's answer to an error (internal/gate).
func classify(err error) *apiError { return gate.Classify(err) }

// presign returns a download link for key, nil for no key.
func (s *server) presign(ctx context.Context, key string) *string {
	return tasks.Room{Signer: s.signer, LinkExpiry: s.cfg.Presign(), Log: s.log}.Link(ctx, key)
}

// uploadStore is the server's presigned uploads.
func (s *server) uploadStore() uploads.Store { return s.intake().Uploads() }

// limits are the media limits of an upload.
func (s *server) limits() admit.Limits { return s.intake().MediaLimits() }
