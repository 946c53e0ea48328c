package testenv

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// vhostBatch is how many virtual hosts one rabbitmqctl call makes or
// deletes. Each rabbitmqctl call starts an Erlang VM: ~1.5 CPU-s, 8-16 s of
// wall time on this 2-core machine under load, the same for one host as
// for eight. Made one by one (add_vhost, set_permissions, delete_vhost) a
// host costs three of them.
const vhostBatch = 8

// vhostStale is the age past which a pooled host left behind by a test
// binary that ended (its tests' hosts are deleted with the next batch, the
// last ones are not) is deleted by any other binary's next batch: longer
// than any `go test -timeout` of this repository.
const vhostStale = 2 * time.Hour

// vhostPrefix starts the name of every pooled host; the Unix time of its
// batch follows, then a random part.
const vhostPrefix = "dubflow-testpool-"

// vhostGather is how long a deletion waits for the hosts of other tests
// ending at about the same time, to delete them all with one rabbitmqctl.
const vhostGather = 250 * time.Millisecond

// vhostPool hands out fresh virtual hosts made vhostBatch at a time and
// deletes those handed back in batches.
type vhostPool struct {
	mu   sync.Mutex
	free map[string][]string  // node → hosts made and not handed out
	gone map[string]*deletion // node → the deletion now gathering hosts
}

// deletion is one rabbitmqctl call deleting the hosts handed back while it
// gathered; done closes when it ran.
type deletion struct {
	hosts []string
	done  chan struct{}
	err   error
}

var vhosts = vhostPool{free: map[string][]string{}, gone: map[string]*deletion{}}

// FreshVhost returns a virtual host on node ("" the machine's default) that
// no test has used, on which user has every permission, and the release to
// call when the test ends: it returns once the host, with every queue a test
// declared in it, is deleted. Hosts are made vhostBatch at a time, and the
// hosts of tests ending together are deleted together, by one rabbitmqctl
// each.
func FreshVhost(node, user string) (vhost string, release func() error, err error) {
	vhosts.mu.Lock()
	defer vhosts.mu.Unlock()
	if len(vhosts.free[node]) == 0 {
		if err := vhosts.refill(node, user); err != nil {
			return "", nil, err
		}
	}
	free := vhosts.free[node]
	vhost, vhosts.free[node] = free[len(free)-1], free[:len(free)-1]
	return vhost, func() error { return vhosts.release(node, vhost) }, nil
}

// refill makes vhostBatch hosts on node and, in the same call, deletes the
// stale ones (made by a test binary that ended before handing them out).
// Binaries refilling at once see the same stale hosts: a host another one
// deleted first raises no_such_vhost, which `catch` keeps from failing the
// refill.
func (p *vhostPool) refill(node, user string) error {
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	var names []string
	for range vhostBatch {
		names = append(names, vhostPrefix+stamp+"-"+strings.ReplaceAll(uuid.NewString()[:13], "-", ""))
	}
	staleBefore := time.Now().Add(-vhostStale).Unix()
	expr := fmt.Sprintf(`Acting = <<"testenv">>,
		[catch rabbit_vhost:delete(V, Acting) || V <- rabbit_vhost:list_names(), testenv_stale(V)],
		[begin rabbit_vhost:add(V, Acting), rabbit_auth_backend_internal:set_permissions(%s, V, <<".*">>, <<".*">>, <<".*">>, Acting) end || V <- [%s]],
		ok.`, erlBinary(user), erlBinaries(names))
	expr = strings.Replace(expr, "testenv_stale(V)", staleTest(staleBefore), 1)
	if err := rabbitEval(node, expr); err != nil {
		return fmt.Errorf("testenv: make %d virtual hosts: %w", vhostBatch, err)
	}
	p.free[node] = names
	return nil
}

// release deletes vhost together with the hosts other tests hand back
// within vhostGather, and returns when they are deleted.
func (p *vhostPool) release(node, vhost string) error {
	p.mu.Lock()
	d := p.gone[node]
	if d == nil {
		d = &deletion{done: make(chan struct{})}
		p.gone[node] = d
		go p.delete(node, d)
	}
	d.hosts = append(d.hosts, vhost)
	p.mu.Unlock()
	<-d.done
	return d.err
}

// delete runs deletion d once it has gathered.
func (p *vhostPool) delete(node string, d *deletion) {
	time.Sleep(vhostGather)
	p.mu.Lock()
	delete(p.gone, node)
	hosts := d.hosts
	p.mu.Unlock()
	expr := fmt.Sprintf(`[rabbit_vhost:delete(V, <<"testenv">>) || V <- [%s]], ok.`, erlBinaries(hosts))
	if err := rabbitEval(node, expr); err != nil {
		d.err = fmt.Errorf("testenv: delete virtual hosts %v: %w", hosts, err)
	}
	close(d.done)
}

// staleTest is an Erlang expression true of a pooled host made before the
// Unix time before.
func staleTest(before int64) string {
	return fmt.Sprintf(`case binary:split(V, <<"-">>, [global]) of
		[<<"dubflow">>, <<"testpool">>, T, _] -> try binary_to_integer(T) < %d catch _:_ -> false end;
		_ -> false end`, before)
}

// erlBinary quotes s as an Erlang binary literal.
func erlBinary(s string) string {
	return `<<"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `">>`
}

// erlBinaries is a comma-separated list of Erlang binary literals.
func erlBinaries(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = erlBinary(s)
	}
	return strings.Join(q, ", ")
}

// rabbitEval runs expr on node with `rabbitmqctl eval`. The CLI is an
// Erlang node of its own that must reach the server's within its own
// timeout: on a loaded machine it sometimes does not, and exits 69
// ("unable to perform an operation on node", EX_UNAVAILABLE) with the
// server up and expr never run; that is tried again, up to three times.
func rabbitEval(node, expr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-q"}
	if node != "" {
		args = append(args, "-n", node)
	}
	for try := 1; ; try++ {
		out, err := exec.CommandContext(ctx, "rabbitmqctl", append(args, "eval", expr)...).CombinedOutput()
		var exit *exec.ExitError
		if err == nil {
			return nil
		}
		if !errors.As(err, &exit) || exit.ExitCode() != 69 || try == 3 || ctx.Err() != nil {
			return fmt.Errorf("rabbitmqctl eval (try %d): %w: %s", try, err, strings.TrimSpace(string(out)))
		}
		time.Sleep(time.Duration(try) * time.Second)
	}
}
