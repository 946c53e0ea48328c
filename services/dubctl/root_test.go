package main

import (
	"errors"
	"strings"
	"testing"
)

// Each tree is built afresh: a flag parsed in one run never leaks into the
// next, and every subcommand is registered.
func TestNewRootCmdBuildsIndependentTrees(t *testing.T) {
	t.Parallel()
	first := newRootCmd()
	second := newRootCmd()
	want := []string{"dlq", "list", "sample", "status", "submit", "wait"}
	for _, name := range want {
		c, _, err := first.Find([]string{name})
		if err != nil || c.Name() != name {
			t.Fatalf("subcommand %s: found %v, %v", name, c, err)
		}
	}
	list, _, _ := first.Find([]string{"list"})
	if err := list.Flags().Set("limit", "3"); err != nil {
		t.Fatal(err)
	}
	other, _, _ := second.Find([]string{"list"})
	if got := other.Flags().Lookup("limit").Value.String(); got != "20" {
		t.Fatalf("a second tree sees limit %s, want its default 20", got)
	}
	if first == second || list == other {
		t.Fatal("newRootCmd returned shared commands")
	}
}

// TestListOptions: both modes' `list` refuse an unknown status, a limit
// out of the mode's range and a since or until that is no time as usage
// errors.
func TestListOptions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o  listOptions
		ok bool
	}{
		{listOptions{status: "", limit: 20, maxLimit: 200}, true},
		{listOptions{status: "done", limit: 200, maxLimit: 200}, true},
		{listOptions{status: "done", limit: 201, maxLimit: 200}, false},
		{listOptions{status: "done", limit: 5000, maxLimit: 10000}, true},
		{listOptions{status: "finished", limit: 20, maxLimit: 10000}, false},
		{listOptions{status: "", limit: 0, maxLimit: 10000}, false},
		{listOptions{since: "2h", until: "2024-01-02", limit: 20, maxLimit: 20}, true},
		{listOptions{since: "yesterday", limit: 20, maxLimit: 20}, false},
		{listOptions{until: "-2h", limit: 20, maxLimit: 20}, false},
	} {
		_, err := c.o.filter()
		if (err == nil) != c.ok {
			t.Errorf("%+v: error %v, want ok=%v", c.o, err, c.ok)
		}
		var e *exitError
		if err != nil && (!errors.As(err, &e) || e.code != exitUsage) {
			t.Errorf("%+v: %v is not a usage error", c.o, err)
		}
	}
}

// TestActorName: --as names who acts (checked like people's text), else
// the operating-system user; never nothing.
func TestActorName(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	if got, err := actorName("ana", none); err != nil || got != "ana" {
		t.Errorf("--as ana: %q, %v", got, err)
	}
	for _, bad := range []string{"ana\x1b[2J", "a\u202eb", strings.Repeat("x", maxActorLength+1)} {
		if _, err := actorName(bad, none); err == nil {
			t.Errorf("--as %q admitted", bad)
		}
	}
	if got, err := actorName("", none); err != nil || got == "" {
		t.Errorf("no --as: %q, %v", got, err)
	}
}
