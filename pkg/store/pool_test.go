package store_test

import (
	"context"
	"io"
	"net"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// A service started before its database waits for it: OpenWait keeps
// trying while nothing listens and connects once the server is there.
func TestOpenWaitWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	u, err := neturl.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	real := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here until the proxy starts
	url := strings.Replace(db.URL, real, addr, 1)

	var tries atomic.Int32
	ready := make(chan struct{})
	go func() {
		// The "database" comes up after the service has retried twice.
		if !testenv.Poll(time.Now().Add(time.Minute), func() bool { return tries.Load() >= 2 }) {
			t.Errorf("OpenWait retried %d times in a minute, want 2", tries.Load())
			return
		}
		proxy(t, addr, real)
		close(ready)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := store.OpenWait(ctx, url, time.Minute, func(error, time.Duration) { tries.Add(1) })
	if err != nil {
		t.Fatalf("OpenWait: %v", err)
	}
	defer pool.Close()
	<-ready
	if tries.Load() < 2 {
		t.Fatalf("connected after %d retries, want at least 2", tries.Load())
	}

	// Open (for commands) does not wait.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := ln2.Addr().String()
	ln2.Close()
	if _, err := store.Open(ctx, strings.Replace(db.URL, real, gone, 1)); err == nil {
		t.Fatal("Open connected to a closed port")
	}
}

// A configuration error is not waited for.
func TestOpenWaitFailsAtOnceOnAMissingDatabase(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	url := db.URL[:strings.LastIndex(db.URL, "/")] + "/no_such_database_dubflow?sslmode=disable"
	var tries atomic.Int32
	_, err := store.OpenWait(context.Background(), url, time.Minute, func(error, time.Duration) { tries.Add(1) })
	if err == nil || tries.Load() != 0 {
		t.Fatalf("missing database: err %v after %d retries, want an error at once", err, tries.Load())
	}
}

// proxy forwards connections on addr to target until the test ends.
func proxy(t *testing.T, addr, target string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("listen %s: %v", addr, err)
		return
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
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
}
