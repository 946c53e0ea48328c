package main

import (
	"context"
	"errors"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// redubTask changes the translation of one segment (numbered from 1) of a
// done task and starts the task's next output version (dub.Redub): only
// that segment is synthesized again and the video assembled again; the
// earlier version stays. A parent task is refused (409) with the names of
// its children, an empty text with 400.
func (s *server) redubTask(ctx context.Context, id uuid.UUID, body redubBody) (any, error) {
	var res *dub.Redubbed
	err := s.commit(ctx, id, func(tx pgx.Tx) ([]int64, error) {
		var err error
		res, err = dub.Redub(ctx, tx, id, body.Segment, body.Text)
		if err != nil {
			return nil, err
		}
		return res.Outbox, nil
	})
	switch {
	case errors.Is(err, dub.ErrNotFound):
		err = apierr.NotFound(err.Error())
	case errors.Is(err, dub.ErrNoSegment), errors.Is(err, dub.ErrInvalidText):
		err = apierr.BadRequest(err.Error())
	case errors.Is(err, dub.ErrParent):
		err = apierr.Conflict(err.Error())
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// redubBody is what POST /api/tasks/{id}/redub reads.
type redubBody struct {
	Segment int    `json:"segment"`
	Text    string `json:"text"`
}
