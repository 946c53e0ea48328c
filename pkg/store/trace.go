package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
)

// NoStep labels the statements of work that is no step's: heartbeats,
// sweeps, reconciler passes, commands.
const NoStep = "none"

type stepKey struct{}

// WithStep labels the statements run under ctx as the step's in the
// statement counters (dubflow_db_statements_total and
// dubflow_db_rows_written_total).
func WithStep(ctx context.Context, step string) context.Context {
	return context.WithValue(ctx, stepKey{}, step)
}

// StepOf is the step WithStep put in ctx, NoStep when none.
func StepOf(ctx context.Context) string {
	if s, ok := ctx.Value(stepKey{}).(string); ok && s != "" {
		return s
	}
	return NoStep
}

// Every pool OpenWait makes counts its statements here: one count per
// statement the server ran (a query of a batch, BEGIN and COMMIT included),
// and the rows its INSERT, UPDATE, DELETE, MERGE or COPY wrote (rows a
// function writes inside a SELECT are not seen).
var (
	statements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dubflow_db_statements_total",
		Help: "SQL statements this process ran on Postgres, by the step they ran for (none: no step's work) and result (ok, error).",
	}, []string{"step", "result"})
	rowsWritten = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dubflow_db_rows_written_total",
		Help: "Rows this process's INSERT, UPDATE, DELETE, MERGE and COPY statements wrote, by step (rows written inside functions called by SELECT are not counted).",
	}, []string{"step"})
)

// Collectors are the statement counters, for a process's registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{statements, rowsWritten}
}

// tracer counts every statement of a pool's connections by the step in the
// query's context (pgx.QueryTracer, pgx.BatchTracer, pgx.CopyFromTracer).
type tracer struct{}

func count(ctx context.Context, tag pgconn.CommandTag, err error) {
	step := StepOf(ctx)
	if err != nil {
		statements.WithLabelValues(step, "error").Inc()
		return
	}
	statements.WithLabelValues(step, "ok").Inc()
	if tag.Insert() || tag.Update() || tag.Delete() || written(tag) {
		rowsWritten.WithLabelValues(step).Add(float64(tag.RowsAffected()))
	}
}

// written reports the command tags of MERGE and COPY, which write rows.
func written(tag pgconn.CommandTag) bool {
	s := tag.String()
	return strings.HasPrefix(s, "MERGE ") || strings.HasPrefix(s, "COPY ")
}

func (tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	count(ctx, d.CommandTag, d.Err)
}

func (tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	count(ctx, d.CommandTag, d.Err)
}

func (tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (tracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return ctx
}

func (tracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromEndData) {
	count(ctx, d.CommandTag, d.Err)
}
