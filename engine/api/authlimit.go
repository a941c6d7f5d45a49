package api

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// DefaultAuthFailures is Config.AuthFailures's default.
const DefaultAuthFailures = 20

// authRefill is how often a client address earns back one failed
// authentication it may make.
const authRefill = 3 * time.Second

// authMaxClients bounds the addresses the limiter remembers: past it,
// addresses back to a full allowance are forgotten first, then the
// oldest.
const authMaxClients = 10000

// authLimiter counts failed authentications (a wrong bearer token, a
// wrong dashboard login) per client address, as a token bucket: a client
// may fail burst times at once and once more every authRefill after;
// past that it is answered 429 before its token is looked at, so that
// guessing a token takes years, not hours. A client that sends the right
// token never spends its allowance.
type authLimiter struct {
	burst int
	now   func() time.Time

	mu      sync.Mutex
	clients map[string]*authBucket
}

type authBucket struct {
	left float64 // failures the client may still make
	at   time.Time
}

func newAuthLimiter(burst int, now func() time.Time) *authLimiter {
	if burst <= 0 {
		return nil
	}
	return &authLimiter{burst: burst, now: now, clients: map[string]*authBucket{}}
}

// clientAddr is the address a request came from (without port). Behind a
// reverse proxy every client shares the proxy's: the limit then applies
// to them together.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// allowance is what b may still fail at now, refilled since b.at.
func (l *authLimiter) allowance(b *authBucket, now time.Time) float64 {
	return min(float64(l.burst), b.left+float64(now.Sub(b.at))/float64(authRefill))
}

// refilled returns addr's bucket brought up to now (nil: a full
// allowance). The caller holds l.mu.
func (l *authLimiter) refilled(addr string, now time.Time) *authBucket {
	b := l.clients[addr]
	if b == nil {
		return nil
	}
	b.left, b.at = l.allowance(b, now), now
	return b
}

// blocked reports whether addr has spent its allowance, and when it may
// try again.
func (l *authLimiter) blocked(addr string) (time.Duration, bool) {
	if l == nil {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refilled(addr, l.now())
	if b == nil || b.left >= 1 {
		return 0, false
	}
	return time.Duration((1 - b.left) * float64(authRefill)), true
}

// failed spends one of addr's allowance.
func (l *authLimiter) failed(addr string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.refilled(addr, now)
	if b == nil {
		if len(l.clients) >= authMaxClients {
			l.forget(now)
		}
		b = &authBucket{left: float64(l.burst), at: now}
		l.clients[addr] = b
	}
	b.left = max(0, b.left-1)
}

// forget drops the addresses back to a full allowance, and if none is,
// the one that failed longest ago. The caller holds l.mu.
func (l *authLimiter) forget(now time.Time) {
	var oldest string
	for addr, b := range l.clients {
		if l.allowance(b, now) >= float64(l.burst) {
			delete(l.clients, addr)
			continue
		}
		if oldest == "" || b.at.Before(l.clients[oldest].at) {
			oldest = addr
		}
	}
	if len(l.clients) >= authMaxClients && oldest != "" {
		delete(l.clients, oldest)
	}
}

// refuseLimited answers 429 to a client that spent its allowance of
// failed authentications, and reports whether it did.
func (s *server) refuseLimited(w http.ResponseWriter, r *http.Request) bool {
	wait, blocked := s.authLimit.blocked(clientAddr(r))
	if !blocked {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(wait.Round(time.Second).Seconds()))))
	writeError(w, http.StatusTooManyRequests, "too many failed authentications from this address; try again later")
	return true
}
