package http

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Pacing after a 429.
//
// A server that throttles with 429 Too Many Requests tells the client how
// many requests its window admits only by refusing the next one. A flow
// that keeps sending at full speed turns most of each window into refused
// requests and retry delays. The pacer learns the limit instead: when a
// host answers 429, the number of requests it admitted during the last
// window is its limit, and from then on requests to that host wait until
// the window has room, so the flow runs at the server's rate without being
// refused. The window is the Retry-After the server sent (1 second when it
// sent none). With no 429 from a host, nothing is paced.
//
// Admission times are taken when the answer arrives, which is never
// earlier than the server's own admission time, so a request that waits
// for its slot cannot land in a window the server still counts as full.

const (
	defaultWindow = time.Second
	// relearnAfter is how long a host must go without a 429 before its
	// learned limit is raised by one, in case the limit was learned while
	// another client shared the server.
	relearnAfter = 30 * time.Second
)

type pacer struct {
	mu    sync.Mutex
	hosts map[string]*hostPace
}

type hostPace struct {
	window   time.Duration
	limit    int         // 0: not learned
	admitted []time.Time // answers that were not 429, oldest first
	inflight int
	last429  time.Time
	wake     chan struct{}
}

func newPacer() *pacer { return &pacer{hosts: map[string]*hostPace{}} }

func (p *pacer) host(h string) *hostPace {
	hp := p.hosts[h]
	if hp == nil {
		hp = &hostPace{window: defaultWindow, wake: make(chan struct{})}
		p.hosts[h] = hp
	}
	return hp
}

// acquire waits until a request to host may be sent.
func (p *pacer) acquire(ctx context.Context, host string) error {
	for {
		p.mu.Lock()
		hp := p.host(host)
		now := time.Now()
		hp.trim(now)
		if hp.limit == 0 || len(hp.admitted)+hp.inflight < hp.limit {
			hp.inflight++
			p.mu.Unlock()
			return nil
		}
		var wait time.Duration
		if len(hp.admitted) > 0 && len(hp.admitted)+hp.inflight-hp.limit < len(hp.admitted) {
			// The oldest admission that must leave the window first.
			oldest := hp.admitted[len(hp.admitted)+hp.inflight-hp.limit]
			wait = oldest.Add(hp.window).Sub(now)
		}
		wake := hp.wake
		p.mu.Unlock()
		if wait <= 0 {
			// Only requests in flight fill the window: wait for one to end.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-wake:
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		case <-wake:
			t.Stop()
		}
	}
}

// release records the answer to a request acquired for host: status 0
// means no answer arrived.
func (p *pacer) release(host string, status int, retryAfter string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hp := p.host(host)
	hp.inflight--
	now := time.Now()
	hp.trim(now)
	switch {
	case status == 429:
		if d, ok := parseRetryAfter(retryAfter); ok {
			hp.window = d
		}
		hp.trim(now)
		n := max(1, len(hp.admitted))
		if hp.limit == 0 || n < hp.limit {
			hp.limit = n
		}
		hp.last429 = now
	case status > 0:
		hp.admitted = append(hp.admitted, now)
		if hp.limit > 0 && now.Sub(hp.last429) > relearnAfter {
			hp.limit++
			hp.last429 = now
		}
	}
	close(hp.wake)
	hp.wake = make(chan struct{})
}

// trim drops admissions that left the window.
func (hp *hostPace) trim(now time.Time) {
	i := 0
	for i < len(hp.admitted) && now.Sub(hp.admitted[i]) >= hp.window {
		i++
	}
	if i > 0 {
		hp.admitted = append(hp.admitted[:0], hp.admitted[i:]...)
	}
}

func parseRetryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 && secs <= 3600 {
		return time.Duration(secs * float64(time.Second)), true
	}
	return 0, false
}
