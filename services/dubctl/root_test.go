package main

import (
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
