package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxies are toxiproxy proxies, in this process, between the services
// and RabbitMQ, Postgres and MinIO: faults cut and slow them. A backend has
// one proxy per server (a RabbitMQ cluster one per node); a fault on the
// backend acts on all of them, a fault on one proxy names it.
type Proxies struct {
	mu      sync.Mutex
	server  *toxiproxy.ApiServer
	byName  map[string]*toxiproxy.Proxy
	backend map[string][]string // backend → its proxies' names
}

func NewProxies() *Proxies {
	return &Proxies{
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		byName:  map[string]*toxiproxy.Proxy{},
		backend: map[string][]string{},
	}
}

// Add starts a proxy of backend, named name, to upstream on a free
// loopback port and returns the port.
func (p *Proxies) Add(backend, name, upstream string) (int, error) {
	px := toxiproxy.NewProxy(p.server, name, "127.0.0.1:0", upstream)
	if err := p.server.Collection.Add(px, true); err != nil {
		return 0, fmt.Errorf("proxy %s: %w", name, err)
	}
	p.mu.Lock()
	p.byName[name] = px
	p.backend[backend] = append(p.backend[backend], name)
	p.mu.Unlock()
	return portOf(px.Listen), nil
}

// of returns the proxies of a backend, or the one proxy so named.
func (p *Proxies) of(name string) []*toxiproxy.Proxy {
	p.mu.Lock()
	defer p.mu.Unlock()
	names, ok := p.backend[name]
	if !ok {
		names = []string{name}
	}
	var out []*toxiproxy.Proxy
	for _, n := range names {
		out = append(out, p.byName[n])
	}
	return out
}

// Cut closes every connection through the proxies and refuses new ones
// until restore.
func (p *Proxies) Cut(name string) {
	for _, px := range p.of(name) {
		px.Stop()
	}
}

// Restore accepts connections again (on the same ports).
func (p *Proxies) Restore(name string) error {
	for _, px := range p.of(name) {
		if err := px.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return fmt.Errorf("proxy %s: restart: %w", px.Name, err)
		}
	}
	return nil
}

// AddToxic adds a toxic given as toxiproxy's JSON (type, stream,
// attributes) to the proxies; undo removes it again.
func (p *Proxies) AddToxic(name, toxicJSON string) (undo func() error, err error) {
	var added []func() error
	undo = func() error {
		var errs []error
		for _, f := range added {
			errs = append(errs, f())
		}
		return errors.Join(errs...)
	}
	for _, px := range p.of(name) {
		w, err := px.Toxics.AddToxicJson(strings.NewReader(toxicJSON))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("proxy %s: add toxic %s: %w", px.Name, toxicJSON, err), undo())
		}
		added = append(added, func() error { return px.Toxics.RemoveToxic(context.Background(), w.Name) })
	}
	return undo, nil
}

// Close stops every proxy.
func (p *Proxies) Close() {
	_ = p.server.Collection.Clear()
}
