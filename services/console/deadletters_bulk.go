package main

import (
	"fmt"
	"net/http"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
)

// bulkRequest is the body of POST /api/dead-letters/replay and /purge: a
// filter (every field optional; since and until as GET /api/dead-letters
// reads since) and dryRun, which only counts.
type bulkRequest struct {
	Step       string `json:"step"`
	ErrorClass string `json:"errorClass"`
	Since      string `json:"since"`
	Until      string `json:"until"`
	Pending    bool   `json:"pending"`
	DryRun     bool   `json:"dryRun"`
}

// bulkResult is what both answer: Matched counts the dead letters the
// filter selects; a replay republishes the Replayable ones (pending, with
// a task), a purge archives and deletes every matched one. With dryRun
// nothing is changed and Replayed/Purged are empty.
type bulkResult struct {
	DryRun     bool              `json:"dryRun"`
	Matched    int               `json:"matched"`
	Replayable int               `json:"replayable"`
	Replayed   []view.Replayed   `json:"replayed"`
	Purged     []int64           `json:"purged"`
	Errors     []string          `json:"errors,omitempty"`
	Filter     map[string]string `json:"filter"`
}

// readBulk reads and checks the filter.
func readBulk(r *http.Request) (bulkRequest, dlq.Match, error) {
	var b bulkRequest
	if err := decodeJSON(r, &b); err != nil {
		return b, dlq.Match{}, err
	}
	if b.Step != "" && wire.RoutingKey(b.Step) == "" {
		return b, dlq.Match{}, badRequest(fmt.Sprintf("step %q: want one of %v", shortValue(b.Step), wire.Pipeline))
	}
	since, until, err := timeRange(b.Since, b.Until)
	if err != nil {
		return b, dlq.Match{}, err
	}
	m := dlq.Match{Step: b.Step, ErrorClass: b.ErrorClass, Pending: b.Pending}
	if since != nil {
		m.Since = *since
	}
	if until != nil {
		m.Until = *until
	}
	return b, m, nil
}

// startBulk reads the filter, counts what it matches and notes both for
// the audit log.
func (s *server) startBulk(r *http.Request) (bulkRequest, dlq.Match, bulkResult, error) {
	b, m, err := readBulk(r)
	if err != nil {
		return b, m, bulkResult{}, err
	}
	out := bulkResult{DryRun: b.DryRun, Filter: map[string]string{"step": b.Step, "errorClass": b.ErrorClass,
		"since": b.Since, "until": b.Until, "pending": fmt.Sprint(b.Pending)}}
	if out.Matched, out.Replayable, err = dlq.Count(r.Context(), s.pool, m); err != nil {
		return b, m, out, err
	}
	noteAudit(r, "filter", out.Filter)
	noteAudit(r, "dryRun", b.DryRun)
	noteAudit(r, "matched", out.Matched)
	return b, m, out, nil
}

// replayDeadLetters replays every pending dead letter the filter matches
// (dlq.ReplayMatching), or with dryRun counts them.
func (s *server) replayDeadLetters(w http.ResponseWriter, r *http.Request) {
	b, m, out, err := s.startBulk(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !b.DryRun {
		res, err := dlq.ReplayMatching(r.Context(), s.pool, s.pub, m)
		if err != nil {
			s.log.Warn().Err(err).Msg("bulk replay: some dead letters were not replayed")
			out.Errors = append(out.Errors, capEchoes(err.Error()))
		}
		out.Replayed = make([]view.Replayed, 0, len(res))
		for _, x := range res {
			out.Replayed = append(out.Replayed, view.ReplayedOf(x))
		}
		noteAudit(r, "replayed", len(res))
	}
	writeJSON(w, http.StatusOK, out)
}

// purgeDeadLetters deletes every dead letter the filter matches, keeping
// each in dead_letters_archive (dlq.Purge), or with dryRun counts them.
func (s *server) purgeDeadLetters(w http.ResponseWriter, r *http.Request) {
	b, m, out, err := s.startBulk(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !b.DryRun {
		if out.Purged, err = dlq.Purge(r.Context(), s.pool, m, principalOf(r).name); err != nil {
			s.fail(w, r, err)
			return
		}
		out.Matched = len(out.Purged)
		noteAudit(r, "purged", len(out.Purged))
		if out.Purged == nil {
			out.Purged = []int64{}
		}
	}
	writeJSON(w, http.StatusOK, out)
}
