package task

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TestPositionalNumbersAsPgxDoes: positional gives the statement and the
// arguments pgx.StrictNamedArgs would rewrite them into — names repeated,
// names in literals and comments left alone, the first call and the cached
// ones alike — and leaves a statement whose names do not match its
// arguments to pgx, which reports the mismatch.
func TestPositionalNumbersAsPgxDoes(t *testing.T) {
	t.Parallel()
	sql := `SELECT @b::int + @a::int, @b::int, '@a in a literal' -- @c in a comment
		, $$@a in dollars$$`
	named := pgx.StrictNamedArgs{"a": 1, "b": 2}
	wantSQL, wantArgs, err := named.RewriteQuery(context.Background(), nil, sql, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		gotSQL, gotArgs := positional(sql, named)
		if gotSQL != wantSQL || !reflect.DeepEqual(gotArgs, wantArgs) {
			t.Fatalf("positional: %q %v, want %q %v", gotSQL, gotArgs, wantSQL, wantArgs)
		}
	}
	for _, bad := range []pgx.StrictNamedArgs{{"a": 1}, {"a": 1, "b": 2, "c": 3}, {"a": 1, "c": 3}} {
		gotSQL, gotArgs := positional(sql, bad)
		if gotSQL != sql || len(gotArgs) != 1 || !reflect.DeepEqual(gotArgs[0], bad) {
			t.Errorf("positional with %v: %q %v, want the statement and the named arguments unchanged", bad, gotSQL, gotArgs)
		}
	}
	// Every transition's statement is numbered (its arguments match its
	// names).
	ref := Ref{ID: uuid.New(), Trace: "trace", Step: "asr"}
	d := Details{ID: ref.ID, SourceLanguage: "en", TargetLanguage: "es"}
	for _, tr := range []Transition{Create(d), Settle(d), Start(ref), Touch(ref.ID), Compensate(ref, "r"),
		Resume(ref), Succeed(ref, []byte(`{}`), ""), Fail(ref, "", "r"), Cancel(ref, "r"), Retry(ref), Redub(ref),
		Spawn(ref, "ca")} {
		if _, named := tr.Args[0].(pgx.StrictNamedArgs); len(tr.Args) == 1 && named {
			t.Errorf("%s: not numbered", tr.Name)
		}
	}
}
