package main

import (
	"context"
	"path"

	"github.com/dubflow/dubflow/pkg/view"
)

// links are presigned GET URLs of a task's objects.
type links = view.Links

// linksOf presigns the task's source and, once dubbed, its outputs, and
// those of each of its children that is done (view.SignLinks, which
// dubctl's database mode calls with the same settings).
func (s *server) linksOf(ctx context.Context, d *taskDetail) {
	if err := view.SignLinks(ctx, s.signer, d, s.cfg.Presign()); err != nil {
		s.log.Warn().Err(err).Str("task_id", d.TaskID.String()).Msg("presign")
	}
}

// presign returns a download link for key, nil for no key.
func (s *server) presign(ctx context.Context, key string) *string {
	if key == "" {
		return nil
	}
	u, err := s.signer.PresignGet(ctx, key, s.cfg.Presign(), path.Base(key))
	if err != nil {
		s.log.Warn().Err(err).Str("key", key).Msg("presign")
		return nil
	}
	v := u.String()
	return &v
}
