package engine

import (
	"container/list"
	"fmt"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// limitResult turns a command report whose payload (its result) is larger
// than max bytes into a command failure that says so: one event never
// carries more than max bytes of result into the log.
func limitResult(ev eventlog.Event, max int) eventlog.Event {
	if max <= 0 || len(ev.Payload) <= max {
		return ev
	}
	switch ev.Type {
	case eventlog.TypeCommandCompleted, eventlog.TypeCommandFailed:
	default:
		return ev
	}
	ev.Type = eventlog.TypeCommandFailed
	ev.Payload = mustJSON(completedPayload{
		Error: fmt.Sprintf("the step's result is %d bytes, more than the %d an event may carry (Config.MaxResultBytes)", len(ev.Payload), max),
		Field: "result",
	})
	return ev
}

// summaryCache keeps the summaries of finished executions for Wait: at
// most max of them, each for at most ttl. One older than that is read back
// from the log when asked for.
type summaryCache struct {
	max      int
	maxBytes int64
	ttl      time.Duration
	order    *list.List // of *cachedSummary, oldest first
	byID     map[string]*list.Element
	bytes    int64 // the kept summaries' resultBytes
}

type cachedSummary struct {
	id    string
	sum   *Summary
	at    time.Time
	bytes int64
}

func newSummaryCache(max int, maxBytes int64, ttl time.Duration) *summaryCache {
	return &summaryCache{max: max, maxBytes: maxBytes, ttl: ttl, order: list.New(), byID: map[string]*list.Element{}}
}

func (c *summaryCache) put(id string, sum *Summary, now time.Time) {
	if e := c.byID[id]; e != nil {
		c.remove(e)
	}
	n := resultBytes(sum.Results, 0)
	c.byID[id] = c.order.PushBack(&cachedSummary{id: id, sum: sum, at: now, bytes: n})
	c.bytes += n
	c.expire(now)
	// The newest goes too when it alone is past maxBytes.
	for c.order.Len() > c.max || (c.bytes > c.maxBytes && c.order.Len() > 0) {
		c.remove(c.order.Front())
	}
}

func (c *summaryCache) get(id string, now time.Time) *Summary {
	c.expire(now)
	if e := c.byID[id]; e != nil {
		return e.Value.(*cachedSummary).sum
	}
	return nil
}

func (c *summaryCache) len() int { return c.order.Len() }

func (c *summaryCache) expire(now time.Time) {
	for e := c.order.Front(); e != nil && now.Sub(e.Value.(*cachedSummary).at) > c.ttl; e = c.order.Front() {
		c.remove(e)
	}
}

func (c *summaryCache) remove(e *list.Element) {
	cs := e.Value.(*cachedSummary)
	delete(c.byID, cs.id)
	c.bytes -= cs.bytes
	c.order.Remove(e)
}

// resultBytes estimates the memory a decoded result holds: its strings'
// bytes and 16 more per value, without encoding it. Results are decoded
// from events, so they hold no cycle; depth bounds the walk all the same.
func resultBytes(v any, depth int) int64 {
	if depth > 10000 {
		return 0
	}
	n := int64(16)
	switch x := v.(type) {
	case string:
		n += int64(len(x))
	case map[string]any:
		for k, e := range x {
			n += int64(len(k)) + resultBytes(e, depth+1)
		}
	case []any:
		for _, e := range x {
			n += resultBytes(e, depth+1)
		}
	}
	return n
}
