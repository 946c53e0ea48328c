package deadletters

import (
	"errors"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// bulkRequest is the body of POST /api/dead-letters/replay and /purge: a
// filter (every field optional; since and until as GET /api/dead-letters
// reads since) and dryRun, which only counts (dlq.BulkRequest, which
// dubctl sends and, in database mode, runs itself).
type bulkRequest = dlq.BulkRequest

// bulkResult is what both answer (dlq.BulkResult).
type bulkResult = dlq.BulkResult

// readBulk reads and checks the filter.
func readBulk(r *http.Request) (bulkRequest, dlq.Match, error) {
	var b bulkRequest
	if err := jsonbody.Decode(r, &b); err != nil {
		return b, dlq.Match{}, err
	}
	m, err := b.Match(time.Now())
	m.Project = route.ProjectOf(r) // a project's token acts on its project's dead letters only
	if errors.Is(err, dlq.ErrBadFilter) {
		err = apierr.BadRequest(err.Error())
	}
	return b, m, err
}

// replayDeadLetters replays every pending dead letter the filter matches
// (dlq.BulkReplay), or with dryRun counts them.
func (s Room) replayDeadLetters(w http.ResponseWriter, r *http.Request) {
	s.bulk(w, r, func(b bulkRequest, m dlq.Match) (bulkResult, error) {
		out, err := dlq.BulkReplay(r.Context(), s.Pool, s.Pub, b, m)
		if len(out.Errors) > 0 {
			s.Log.Warn().Strs("errors", out.Errors).Msg("bulk replay: some dead letters were not replayed")
		}
		return out, err
	})
}

// purgeDeadLetters deletes every dead letter the filter matches, keeping
// each in dead_letters_archive (dlq.BulkPurge), or with dryRun counts them.
func (s Room) purgeDeadLetters(w http.ResponseWriter, r *http.Request) {
	s.bulk(w, r, func(b bulkRequest, m dlq.Match) (bulkResult, error) {
		return dlq.BulkPurge(r.Context(), s.Pool, b, m, route.PrincipalOf(r).Name)
	})
}

// bulk reads the filter, runs do and answers its result, noting the
// filter and the counts for the audit log (BulkResult.AuditDetail).
func (s Room) bulk(w http.ResponseWriter, r *http.Request, do func(bulkRequest, dlq.Match) (bulkResult, error)) {
	b, m, err := readBulk(r)
	var out bulkResult
	if err == nil {
		out, err = do(b, m)
	}
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	for k, v := range out.AuditDetail() {
		auditlog.Note(r, k, v)
	}
	route.JSON(w, http.StatusOK, out)
}
