package testenv

import (
	"bytes"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP connections from a local listener to a real server,
// so that a test can make "the server" drop every connection of one
// client at once: point the client at [Proxy.Addr] and call
// [Proxy.DropConnections]. Servers such as NATS, ClickHouse or an S3
// gateway offer no way to kick one client; to the client, a proxy that
// closes its sockets looks exactly like that. [Proxy.Hole] makes it go
// silent instead, as a stuck middlebox, a NAT that forgot the connection
// or a frozen server does: it stops forwarding in both directions without
// closing either side's socket, so a client sees neither data nor an
// error, until [Proxy.Resume].
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	quit   chan struct{} // closed when the proxy closes
	held   atomic.Int64

	mu       sync.Mutex
	conns    map[net.Conn]bool // both ends of every open pair
	closed   bool
	refuse   int // connections still to close on arrival
	accepted int
	open     chan struct{} // closed while forwarding (no Hole)
	// marker, when set, is what a client message must hold for the
	// target's reply to it to be lost (LoseReplyTo); lose is then the
	// target side of that message's connection, cut once it answers.
	marker []byte
	lose   net.Conn
	lost   chan struct{}
	// keep is how many bytes of that reply still go through before the
	// rest is lost (LoseReplyAfter).
	keep int
	// cutAt, with marker, drops the message itself (CutAt) instead of
	// its reply.
	cutAt     bool
	cutRefuse int
}

// NewProxy listens on a free port of 127.0.0.1 and forwards every
// connection it accepts to target (host:port). The proxy and every
// connection through it are closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy listen: %v", err)
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]bool), open: open, quit: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// NewURLProxy is NewProxy in front of the host of rawURL (a postgres://,
// nats:// or http:// URL): it returns the proxy and rawURL pointing at it.
func NewURLProxy(t testing.TB, rawURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("testenv: proxy for %q: %v", rawURL, err)
	}
	p := NewProxy(t, u.Host)
	u.Host = p.Addr()
	return p, u.String()
}

// Addr returns the proxy's host:port, to use in place of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DropConnections closes every connection through the proxy, on both
// sides, and returns how many client connections it cut. The proxy keeps
// accepting new ones.
func (p *Proxy) DropConnections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns) / 2
	for c := range p.conns {
		_ = c.Close()
	}
	return n
}

// RefuseNext makes the proxy close the next n connections it accepts at
// once, without reaching the target, as a server that is down or not yet
// listening does to a client; later ones are forwarded again.
func (p *Proxy) RefuseNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = n
}

// Accepted returns the number of client connections the proxy accepted,
// the refused ones included.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Open returns the number of client connections through the proxy that
// are still open.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// WaitClosed polls until no connection through the proxy is open and
// fails the test if some still are after timeout. A dropped pair leaves
// the count once both of its copying goroutines have seen the close.
func (p *Proxy) WaitClosed(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for p.Open() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: %d proxied connections still open %v after the drop", p.Open(), timeout)
		}
		time.Sleep(10 * time.Millisecond) // polling the proxy with a deadline
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		refused := p.refuse > 0
		if refused {
			p.refuse--
		}
		p.mu.Unlock()
		if refused {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		p.conns[c], p.conns[up] = true, true
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, up, false)
		go p.pipe(up, c, true)
	}
}

// Hole stops forwarding: what either side sends is held back, and no
// socket closes. A pipe waiting at the hole ends only with Resume or the
// proxy's close, not with DropConnections.
func (p *Proxy) Hole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// Resume forwards again, what was held back first.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
	p.held.Store(0)
}

// Held is how many bytes a client or the target sent into the hole since
// it opened: more than zero once someone waits on an answer that cannot
// come.
func (p *Proxy) Held() int64 { return p.held.Load() }

func (p *Proxy) gate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

// LoseReplyTo makes the proxy lose the target's reply to the next client
// message that holds marker: the message reaches the target, which acts
// on it (a database commits it), and the first answer the target sends
// on that connection is dropped, with every connection through the
// proxy, as a server that crashed or a network that cut out just after a
// commit does. The client cannot tell whether its request took effect.
// The returned channel is closed once the reply was lost.
func (p *Proxy) LoseReplyTo(marker []byte) <-chan struct{} { return p.LoseReplyAfter(marker, 0) }

// LoseReplyAfter is LoseReplyTo, losing the target's reply only after its
// first keep bytes went through: a connection cut while a long answer
// (a query's rows) streams in, the client holding part of it.
func (p *Proxy) LoseReplyAfter(marker []byte, keep int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker, p.lose, p.lost, p.cutAt, p.keep = bytes.Clone(marker), nil, make(chan struct{}), false, keep
	return p.lost
}

// CutAt makes the proxy drop the next client message that holds marker,
// before it reaches the target, and with it every connection through the
// proxy, as a server that went down just before the request does; then
// the proxy refuses the next refuse connections (see RefuseNext). The
// returned channel is closed once the message was dropped.
func (p *Proxy) CutAt(marker []byte, refuse int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker, p.lose, p.lost, p.cutAt = bytes.Clone(marker), nil, make(chan struct{}), true
	p.cutRefuse = refuse
	return p.lost
}

// watch notes, for LoseReplyTo, LoseReplyAfter and CutAt, a client
// message read from src bound for dst (the target), and reports whether
// data is to be lost, and so the moment to drop every connection: the
// message itself (CutAt), or a reply read from src, the target, to the
// marked message (LoseReplyTo), past its first keep bytes; pass is how
// much of data still goes through first.
func (p *Proxy) watch(dst, src net.Conn, data []byte, toTarget bool) (pass int, lose bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if toTarget {
		if p.marker == nil || !bytes.Contains(data, p.marker) {
			return 0, false
		}
		p.marker = nil
		if p.cutAt {
			p.refuse = p.cutRefuse
			close(p.lost)
			return 0, true
		}
		p.lose = dst
		return 0, false
	}
	if p.lose == nil || p.lose != src {
		return 0, false
	}
	if len(data) <= p.keep {
		p.keep -= len(data)
		return 0, false
	}
	pass, p.keep, p.lose = p.keep, 0, nil
	close(p.lost)
	return pass, true
}

// pipe copies src to dst, holding each read back while the proxy is in a
// Hole, until either side closes; then it closes both. toTarget is true
// for the client-to-target direction.
func (p *Proxy) pipe(dst, src net.Conn, toTarget bool) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if pass, lose := p.watch(dst, src, buf[:n], toTarget); lose {
				if pass > 0 {
					_, _ = dst.Write(buf[:pass])
				}
				p.DropConnections()
				return
			}
		}
		if n > 0 {
			if gate := p.gate(); !isClosed(gate) {
				p.held.Add(int64(n))
				select {
				case <-gate:
				case <-p.quit:
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// close stops accepting, cuts every connection and waits for the
// goroutines.
func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	close(p.quit)
	p.DropConnections()
	p.wg.Wait()
}
