package broker

import (
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// cutProxy forwards TCP connections to a broker and can cut the network
// silently: after Cut, the links open at that moment stop carrying bytes in
// either direction (nothing is read, nothing is closed), as when a cable is
// pulled; connections made afterwards work normally.
type cutProxy struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed at cleanup

	mu    sync.Mutex
	links []*link
}

type link struct {
	client, server net.Conn
	cut            chan struct{}
	once           sync.Once
	done           chan struct{}
}

// newCutProxy proxies to the host of amqpURL and returns the proxy and the
// URL to dial through it.
func newCutProxy(t *testing.T, amqpURL string) (*cutProxy, string) {
	t.Helper()
	uri, err := amqp.ParseURI(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)), done: make(chan struct{})}
	go p.accept()
	t.Cleanup(p.close)
	uri.Host = "127.0.0.1"
	uri.Port = ln.Addr().(*net.TCPAddr).Port
	return p, uri.String()
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: s, cut: make(chan struct{}), done: p.done}
		p.mu.Lock()
		p.links = append(p.links, l)
		p.mu.Unlock()
		go l.pipe(s, c)
		go l.pipe(c, s)
	}
}

// pipe copies src to dst until the link is cut or either side closes.
func (l *link) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-l.cut:
			// Swallow what was read and stop reading: the sender's
			// buffers fill up and its writes stall, as on a dead network.
			<-l.done
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			_ = dst.Close()
			return
		}
	}
}

// Cut silently stops every link open now.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		l.once.Do(func() { close(l.cut) })
	}
}

func (p *cutProxy) close() {
	_ = p.ln.Close()
	close(p.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		_ = l.client.Close()
		_ = l.server.Close()
	}
}
