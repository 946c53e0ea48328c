package testenv

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
)

// Main runs a package's tests (call it from TestMain: os.Exit(Main(m, n)))
// with at most parallel of its parallel tests at once, unless the command
// line says otherwise (go test -parallel) or parallel < 1, and removes what
// finished tests leave behind (their virtual hosts, databases and buckets)
// in the background, waiting for all of it before it returns.
//
// go test's default -parallel is GOMAXPROCS, 2 on a 2-core machine, which
// suits tests that compute; it idles a package whose isolated tests spend
// their time waiting for a broker, a database, a lease or a sweep to come
// round. Give such a package the number of its tests that may wait side by
// side without their CPU, database connections (each test's pool holds up
// to four) or processes crowding one another. And a test that waits for
// rabbitmqctl to delete its virtual host (an Erlang VM started: seconds on
// a loaded machine) or for Postgres to drop its database holds its place
// among the parallel tests for nothing.
func Main(m *testing.M, parallel int) int {
	SetParallel(parallel)
	tidying.start()
	code := m.Run()
	tidying.wait()
	return code
}

// SetParallel sets go test's -parallel to n unless the command line set
// it or n < 1 (go test's default stays); a TestMain that does more than
// Main calls it before m.Run.
func SetParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && n >= 1 {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// tidying runs the removals of what ended tests leave behind: in the
// background once Main started it, else at once.
var tidying tidier

type tidier struct {
	mu         sync.Mutex
	background bool
	wg         sync.WaitGroup
}

func (td *tidier) start() {
	td.mu.Lock()
	defer td.mu.Unlock()
	td.background = true
}

// wait waits for every removal under way; later ones run at once.
func (td *tidier) wait() {
	td.mu.Lock()
	td.background = false
	td.mu.Unlock()
	td.wg.Wait()
}

// tidy removes what a test that ended left behind with remove, whose error
// is logged with tb.Logf when it runs at once, and on stderr when it runs
// in the background (the test may be over by then).
func (td *tidier) tidy(tb testing.TB, remove func() error) {
	td.mu.Lock()
	background := td.background
	if background {
		td.wg.Add(1)
	}
	td.mu.Unlock()
	if !background {
		if err := remove(); err != nil {
			tb.Logf("%v", err)
		}
		return
	}
	name := tb.Name()
	go func() {
		defer td.wg.Done()
		if err := remove(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: after %s: %v\n", name, err)
		}
	}()
}
