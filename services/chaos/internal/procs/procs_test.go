package procs

import (
	"testing"
)

func TestRotate(t *testing.T) {
	if got := Rotate("a,b,c", 4); got != "b,c,a" {
		t.Errorf("rotate = %q", got)
	}
	if got := Rotate("a", 2); got != "a" {
		t.Errorf("rotate one = %q", got)
	}
}
