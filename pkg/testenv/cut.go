package testenv

import (
	"errors"
	"net"
	neturl "net/url"
	"strings"
	"sync"
	"testing"

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
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	px := toxiproxy.NewProxy(server, "cut-"+strings.ReplaceAll(u.Host, ":", "-"), "127.0.0.1:0", u.Host)
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
