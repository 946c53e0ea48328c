package localstack

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// echoServer answers each line with its name and the line.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write([]byte(name + ":" + sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// ask sends line through the forwarder on a new connection and returns
// the answer ("" when the connection is refused or closed).
func ask(t *testing.T, f *Forwarder, line string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", f.Addr(), time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return ""
	}
	answer, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return ""
	}
	return strings.TrimSpace(answer)
}

// A Forwarder spreads connections over its upstreams in turn, skips one
// that refuses them, and closes everything while cut.
func TestForwarderSpreadsSkipsAndCuts(t *testing.T) {
	t.Parallel()
	dead, err := FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	f, err := Forward(echoServer(t, "a"), dead, echoServer(t, "b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	seen := map[string]int{}
	for range 6 {
		seen[ask(t, f, "x")]++
	}
	if seen["a:x"] == 0 || seen["b:x"] == 0 || len(seen) != 2 {
		t.Fatalf("answers %v: want both live upstreams, never a failure", seen)
	}
	f.Cut()
	if got := ask(t, f, "x"); got != "" {
		t.Fatalf("cut: answered %q", got)
	}
	f.Restore()
	if got := ask(t, f, "x"); got != "a:x" && got != "b:x" {
		t.Fatalf("restored: answered %q", got)
	}
}
