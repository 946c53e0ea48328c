package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// proxies are toxiproxy proxies, in this process, between the services
// and RabbitMQ, Postgres and MinIO: faults cut and slow them.
type proxies struct {
	mu     sync.Mutex
	server *toxiproxy.ApiServer
	byName map[string]*toxiproxy.Proxy
}

func newProxies() *proxies {
	return &proxies{
		server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		byName: map[string]*toxiproxy.Proxy{},
	}
}

// add starts a proxy to upstream on a free loopback port and returns the
// port.
func (p *proxies) add(name, upstream string) (int, error) {
	px := toxiproxy.NewProxy(p.server, name, "127.0.0.1:0", upstream)
	if err := p.server.Collection.Add(px, true); err != nil {
		return 0, fmt.Errorf("proxy %s: %w", name, err)
	}
	p.mu.Lock()
	p.byName[name] = px
	p.mu.Unlock()
	return portOf(px.Listen), nil
}

func (p *proxies) get(name string) *toxiproxy.Proxy {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byName[name]
}

// cut closes every connection through the proxy and refuses new ones
// until restore.
func (p *proxies) cut(name string) { p.get(name).Stop() }

// restore accepts connections again (on the same port).
func (p *proxies) restore(name string) error {
	if err := p.get(name).Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
		return fmt.Errorf("proxy %s: restart: %w", name, err)
	}
	return nil
}

// addToxic adds a toxic given as toxiproxy's JSON (type, stream,
// attributes); its name is returned for removeToxic.
func (p *proxies) addToxic(name, toxicJSON string) (string, error) {
	w, err := p.get(name).Toxics.AddToxicJson(strings.NewReader(toxicJSON))
	if err != nil {
		return "", fmt.Errorf("proxy %s: add toxic %s: %w", name, toxicJSON, err)
	}
	return w.Name, nil
}

func (p *proxies) removeToxic(name, toxic string) error {
	return p.get(name).Toxics.RemoveToxic(context.Background(), toxic)
}

// close stops every proxy.
func (p *proxies) close() {
	_ = p.server.Collection.Clear()
}
