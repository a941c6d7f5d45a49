// Package blackhole is a TCP proxy for tests that can go silent: on Hole
// it stops forwarding in both directions without closing either side's
// socket, as a stuck middlebox, a NAT that forgot the connection or a
// dropped route does, so that a client sees neither data nor an error.
// Resume forwards again what was held back, and what follows.
package blackhole

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards the connections it accepts to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	open  chan struct{} // closed while forwarding
	conns []net.Conn
	quit  chan struct{}
	wg    sync.WaitGroup
	held  atomic.Int64
}

// Start listens on a free loopback port and forwards to target until the
// test ends; it fails t if it cannot listen.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, target: target, open: open, quit: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Hole stops forwarding: bytes read from either side are held back.
func (p *Proxy) Hole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// Resume forwards again, the bytes held back first.
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

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

// pipe copies src to dst, holding each read back while the hole is open.
// Once src ends (or dst fails) both sockets close, as a proxy's do: the
// other side then sees the end too.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			gate := p.gate()
			select {
			case <-gate:
			default:
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

// close stops the proxy and closes every connection it forwarded.
func (p *Proxy) close() {
	close(p.quit)
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
