package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Cuttable is a toxiproxy proxy, in the test's process, in front of a real
// server: Cut resets every connection through it and refuses new ones
// until Restore, as a network cut or a server going away would.
type Cuttable struct {
	// URL is the server's URL with its host replaced by the proxy's.
	URL   string
	mu    sync.Mutex
	proxy *toxiproxy.Proxy
}

// CutProxy puts a proxy in front of the host of url (postgres://,
// amqp://, http://) and returns it; it is removed when the test ends.
func CutProxy(t testing.TB, url string) *Cuttable {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatalf("testenv: parse %q: %v", url, err)
	}
	upstream := u.Host
	if u.Port() == "" {
		// The URL's scheme implies the port (amqp://localhost/vhost).
		port, ok := map[string]string{"amqp": "5672", "amqps": "5671", "postgres": "5432", "postgresql": "5432", "http": "80", "https": "443"}[u.Scheme]
		if !ok {
			t.Fatalf("testenv: %q names no port and its scheme implies none", url)
		}
		upstream = net.JoinHostPort(u.Hostname(), port)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	px := toxiproxy.NewProxy(server, "cut-"+strings.ReplaceAll(upstream, ":", "-"), "127.0.0.1:0", upstream)
	if err := server.Collection.Add(px, true); err != nil {
		t.Fatalf("testenv: proxy to %s: %v", u.Host, err)
	}
	t.Cleanup(func() { _ = server.Collection.Clear() })
	_, port, _ := net.SplitHostPort(px.Listen)
	u.Host = "127.0.0.1:" + port
	return &Cuttable{URL: u.String(), proxy: px}
}

// Cut closes every connection through the proxy and refuses new ones.
func (c *Cuttable) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.proxy.Stop()
}

// Restore accepts connections again, on the same port.
func (c *Cuttable) Restore() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.proxy.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
		return err
	}
	return nil
}

// Delay holds back everything the server sends through the proxy for d
// (a toxiproxy latency toxic downstream), as a slow or overloaded server
// would answer, until Undelay.
func (c *Cuttable) Delay(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"delay","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, d.Milliseconds())))
	return err
}

// Undelay ends Delay.
func (c *Cuttable) Undelay() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxy.Toxics.RemoveToxic(context.Background(), "delay")
}

// HoldAnswers holds back everything the server sends through the proxy and
// closes each connection close after (a toxiproxy timeout toxic
// downstream): what the client sent is applied, its answer never comes, as
// when a server goes away between a COMMIT and its answer. ReleaseAnswers
// ends it.
func (c *Cuttable) HoldAnswers(close time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"hold","type":"timeout","stream":"downstream","attributes":{"timeout":%d}}`, close.Milliseconds())))
	return err
}

// ReleaseAnswers ends HoldAnswers.
func (c *Cuttable) ReleaseAnswers() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxy.Toxics.RemoveToxic(context.Background(), "hold")
}
