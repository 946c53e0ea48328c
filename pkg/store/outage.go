package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Unreachable reports whether err says that Postgres could not be reached
// or went away (an outage of the database), rather than that a statement
// failed: a connection refused, reset or closed, a server shutting down or
// still starting (57P01, 57P02, 57P03), too many connections (53300), any
// connection exception (class 08). A statement's own error (a constraint,
// a syntax error, a refused password) and a context's end are not.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return strings.HasPrefix(pg.Code, "08") ||
			pg.Code == "57P01" || pg.Code == "57P02" || pg.Code == "57P03" || pg.Code == "53300" || pg.Code == "25006"
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) || errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	// A network failure under a query: pgx wraps it in its own error,
	// which says whether it happened before anything was sent, or in its
	// batch's (a batch's statements are prepared first). Requiring a
	// wrapper of pgx's keeps the network errors of other services (an HTTP
	// engine) out of this class.
	var driver interface{ SafeToRetry() bool }
	var batch pgx.ErrPreprocessingBatch
	if !errors.As(err, &driver) && !errors.As(err, &batch) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// MarkUnavailable marks err fault.Unavailable when it is an outage of the
// database (Unreachable), so that the step runtime waits for the database
// with growing pauses instead of spending the step's retries; any other
// error, and one already marked Unavailable or Permanent, is returned as
// it is.
func MarkUnavailable(err error) error {
	if !Unreachable(err) || fault.IsUnavailable(err) || fault.IsPermanent(err) {
		return err
	}
	return fault.Unavailable(err)
}
