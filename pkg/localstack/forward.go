package localstack

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Forwarder is a TCP forwarder on a loopback port: each connection goes to
// the next of its upstreams in turn, and to the one after when that one
// refuses it, as a load balancer in front of servers that serve the same
// thing (the processes of a distributed MinIO) would do. With one upstream
// it is a plain proxy that can be cut (a replication link). It runs in the
// process that made it.
type Forwarder struct {
	ln        net.Listener
	upstreams []string

	mu    sync.Mutex
	next  int
	cut   bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// Forward listens on a free loopback port and forwards every connection to
// one of upstreams (host:port); Close stops it.
func Forward(upstreams ...string) (*Forwarder, error) {
	if len(upstreams) == 0 {
		return nil, errors.New("forward: no upstream")
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("forward: listen on %s: %w", addr, err)
	}
	f := &Forwarder{ln: ln, upstreams: upstreams, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// Addr is the address the forwarder listens on (127.0.0.1:port).
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// Cut closes every connection through the forwarder and closes new ones
// at once, until Restore: the link is down.
func (f *Forwarder) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = true
	for c := range f.conns {
		c.Close()
	}
}

// Restore lets connections through again.
func (f *Forwarder) Restore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = false
}

// Close stops listening, closes every connection and waits for the
// goroutines.
func (f *Forwarder) Close() error {
	err := f.ln.Close()
	f.Cut()
	f.wg.Wait()
	return err
}

func (f *Forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.serve(c)
	}
}

// serve connects c to an upstream and copies both ways until either side
// closes.
func (f *Forwarder) serve(c net.Conn) {
	defer f.wg.Done()
	if !f.track(c) {
		c.Close()
		return
	}
	defer f.untrack(c)
	up, err := f.dial()
	if err != nil || !f.track(up) {
		c.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	defer f.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// dial connects to the next upstream that accepts, starting after the one
// used last.
func (f *Forwarder) dial() (net.Conn, error) {
	f.mu.Lock()
	start := f.next
	f.next++
	f.mu.Unlock()
	var errs []error
	for i := range f.upstreams {
		addr := f.upstreams[(start+i)%len(f.upstreams)]
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// track records an open connection; false when the link is cut (the
// connection must be closed).
func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return false
	}
	f.conns[c] = true
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
	c.Close()
}
