package testenv

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// listVhosts returns the virtual hosts of node.
func listVhosts(t *testing.T, node string) string {
	t.Helper()
	args := []string{"-q"}
	if node != "" {
		args = append(args, "-n", node)
	}
	out, err := exec.Command("rabbitmqctl", append(args, "list_vhosts")...).CombinedOutput()
	if err != nil {
		t.Fatalf("list_vhosts: %v: %s", err, out)
	}
	return string(out)
}

// A pooled virtual host is fresh, usable by the URL's user, distinct from
// the others handed out, and deleted, with the hosts handed back at the same
// time, before its release returns.
func TestFreshVhostsAreMadeAndDeletedInBatches(t *testing.T) {
	if _, err := exec.LookPath("rabbitmqctl"); err != nil || containersUp != nil {
		t.Skip("needs the local broker's rabbitmqctl (on containers, AMQP makes hosts one by one)")
	}
	uri, err := amqp.ParseURI(Env("AMQP_URL", DefaultAMQPURL))
	if err != nil {
		t.Fatal(err)
	}
	node := os.Getenv("RABBITMQ_NODENAME")
	seen := map[string]bool{}
	var releases []func() error
	for range vhostBatch + 1 {
		v, release, err := FreshVhost(node, uri.Username)
		if err != nil {
			t.Fatal(err)
		}
		if seen[v] {
			t.Fatalf("%s handed out twice", v)
		}
		seen[v] = true
		releases = append(releases, release)
	}
	first := ""
	for v := range seen {
		first = v
		break
	}
	u := uri
	u.Vhost = first
	conn, err := amqp.Dial(u.String())
	if err != nil {
		t.Fatalf("connect to pooled host %s: %v", first, err)
	}
	_ = conn.Close()
	var wg sync.WaitGroup
	for _, r := range releases {
		wg.Go(func() {
			if err := r(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	left, all := 0, listVhosts(t, node)
	for v := range seen {
		if strings.Contains(all, v) {
			left++
		}
	}
	if left > 0 {
		t.Errorf("%d of %d released hosts still exist after their release returned", left, len(seen))
	}
}
