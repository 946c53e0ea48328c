package testenv

import "testing"

// FreeAddr never hands out one address twice in a process, though the kernel
// may give a port again as soon as its listener is closed.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("FreeAddr returned %s twice", addr)
		}
		seen[addr] = true
	}
}
