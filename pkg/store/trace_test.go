package store_test

import (
	"context"
	"testing"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// counted reads the statement and row counters of step.
func counted(t *testing.T, reg *prometheus.Registry, step string) (ok, failed, rows float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["step"] != step {
				continue
			}
			switch {
			case f.GetName() == "dubflow_db_statements_total" && labels["result"] == "ok":
				ok = m.GetCounter().GetValue()
			case f.GetName() == "dubflow_db_statements_total":
				failed = m.GetCounter().GetValue()
			case f.GetName() == "dubflow_db_rows_written_total":
				rows = m.GetCounter().GetValue()
			}
		}
	}
	return ok, failed, rows
}

// Every statement a pool runs is counted under the step of its context:
// single queries, each query of a batch, a transaction's BEGIN and COMMIT,
// COPY, failed statements apart; rows by what the command tags say.
func TestStatementsAreCountedByStep(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	pool, err := store.Open(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(store.Collectors()...)
	// A step name of this test's own: other tests of the package run in
	// parallel on the same counters.
	step := "trace-" + t.Name()
	sctx := store.WithStep(ctx, step)
	if got := store.StepOf(ctx); got != store.NoStep {
		t.Errorf("StepOf a bare context = %q, want %q", got, store.NoStep)
	}

	mustExec(t, pool, sctx, `CREATE TABLE traced (n int)`)                     // 1
	mustExec(t, pool, sctx, `INSERT INTO traced SELECT generate_series(1, 5)`) // 2, 5 rows
	mustExec(t, pool, sctx, `UPDATE traced SET n = n + 1 WHERE n <= 2`)        // 3, 2 rows
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM traced WHERE n = 3`)
	b.Queue(`SELECT count(*) FROM traced`)
	if err := pool.SendBatch(sctx, b).Close(); err != nil { // 5, 2 rows (n was 2, 3, 3, 4, 5)
		t.Fatal(err)
	}
	if _, err := pool.CopyFrom(sctx, pgx.Identifier{"traced"}, []string{"n"},
		pgx.CopyFromRows([][]any{{7}, {8}, {9}})); err != nil { // 6, 3 rows
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(sctx, pool, func(tx pgx.Tx) error { // BEGIN, INSERT, COMMIT: 9, 1 row
		_, err := tx.Exec(sctx, `INSERT INTO traced VALUES (10)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(sctx, `SELECT * FROM no_such_table`); err == nil {
		t.Fatal("a query of a missing table succeeded")
	}
	mustExec(t, pool, ctx, `SELECT 1`) // no step's

	ok, failed, rows := counted(t, reg, step)
	if ok != 9 || failed != 1 || rows != 13 {
		t.Errorf("step %s: %v statements ok, %v failed, %v rows written; want 9, 1, 13", step, ok, failed, rows)
	}
	if n := testutil.CollectAndCount(reg, "dubflow_db_statements_total"); n < 2 {
		t.Errorf("%d series of dubflow_db_statements_total, want the step's and none's", n)
	}
}

func mustExec(t *testing.T, pool *pgxpool.Pool, ctx context.Context, sql string) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}
