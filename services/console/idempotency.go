package main

import (
	"net/http"

	"github.com/dubflow/dubflow/services/console/internal/idempotent"
	"github.com/dubflow/dubflow/services/console/internal/uploads"
	"github.com/google/uuid"
)

// idempotentGuard is the server's (internal/idempotent).
func (s *server) idempotentGuard() idempotent.Guard {
	return idempotent.Guard{Pool: s.pool, Log: s.log, Fail: s.fail,
		Who: func(r *http.Request) string { return principalOf(r).Name },
		TaskOfUpload: func(key string) uuid.UUID {
			id, _, _ := uploads.TaskOf(key)
			return id
		},
		FormError: func(err error) error { return formError(err, s.cfg.Limits.MaxVideoBytes) }}
}

// idempotent runs next — POST /api/tasks — at most once per principal and
// Idempotency-Key (idempotent.Guard.Wrap).
func (s *server) idempotent(next http.HandlerFunc) http.HandlerFunc {
	return s.idempotentGuard().Wrap(next)
}
