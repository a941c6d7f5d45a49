// Package clientcache keeps the cursor drivers' connections: one client
// (pool, handle, bucket) per credential, made by the first Open that needs
// it and closed, all together, by the driver's Close.
//
// A client keyed by a keychain alias (Get) is kept until then: a keychain
// has few entries. One keyed by a URL the playbook gives (a cursor's url
// option, which a template may make differ per execution) is taken with
// Acquire and given back with its release: past MaxIdle such clients
// nobody holds, the least recently used are closed, so that a server
// running many executions does not keep a pool for every URL it met.
package clientcache

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/cursorflow/cursorflow/cursor"
)

// MaxIdle is how many clients taken with Acquire a cache keeps while no
// one holds them; past it, the least recently released are closed.
const MaxIdle = 16

// Cache holds one client of type T per credential. It is safe for
// concurrent use; the zero value is not usable, call New.
type Cache[T comparable] struct {
	closeClient func(T) error

	mu      sync.Mutex
	clients map[string]*entry[T]
	closed  bool
	tick    uint64 // orders releases, for the least recently used
}

// entry is a cached client: pinned by Get (kept until Close), or held by
// refs Acquires and idle since used when none holds it.
type entry[T comparable] struct {
	v      T
	pinned bool
	refs   int
	used   uint64
}

// idle reports that no one holds e and Get did not pin it.
func (e *entry[T]) idle() bool { return !e.pinned && e.refs == 0 }

// New returns an empty cache whose Close closes each client with
// closeClient.
func New[T comparable](closeClient func(T) error) *Cache[T] {
	return &Cache[T]{closeClient: closeClient, clients: make(map[string]*entry[T])}
}

// Get returns the client cached for credential or, the first time, the
// one open makes (open runs under the cache's lock, so a credential's
// client is made once), and keeps it until Close. It fails with
// cursor.ErrClosed after Close and caches nothing when open fails.
func (c *Cache[T]) Get(credential string, open func() (T, error)) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.entry(credential, open)
	if err != nil {
		var zero T
		return zero, err
	}
	e.pinned = true
	return e.v, nil
}

// Acquire is Get for a client the caller gives back with release (once)
// when it is done with it: no longer held, the client stays cached, and
// is closed once MaxIdle others were released after it.
func (c *Cache[T]) Acquire(key string, open func() (T, error)) (v T, release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, err := c.entry(key, open)
	if err != nil {
		var zero T
		return zero, nil, err
	}
	e.refs++
	var once sync.Once
	return e.v, func() { once.Do(func() { c.release(e) }) }, nil
}

// entry returns key's entry, made with open the first time; c.mu is held.
func (c *Cache[T]) entry(key string, open func() (T, error)) (*entry[T], error) {
	if c.closed {
		return nil, cursor.ErrClosed
	}
	if e, ok := c.clients[key]; ok {
		return e, nil
	}
	v, err := open()
	if err != nil {
		return nil, err
	}
	e := &entry[T]{v: v}
	c.clients[key] = e
	return e, nil
}

// release gives an Acquire's hold on e back and closes the least recently
// released idle clients past MaxIdle.
func (c *Cache[T]) release(e *entry[T]) {
	c.mu.Lock()
	e.refs--
	c.tick++
	e.used = c.tick
	idle := 0
	for _, x := range c.clients {
		if x.idle() {
			idle++
		}
	}
	// A release per statement (clickhouse) is the common case, with no
	// more idle clients than MaxIdle: it counts them and allocates nothing.
	var evicted []T
	if idle > MaxIdle {
		keys := make([]string, 0, idle)
		for k, x := range c.clients {
			if x.idle() {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(c.clients[a].used, c.clients[b].used) })
		for _, k := range keys[:idle-MaxIdle] {
			evicted = append(evicted, c.clients[k].v)
			delete(c.clients, k)
		}
	}
	c.mu.Unlock()
	for _, v := range evicted {
		_ = c.closeClient(v) // idle: nobody is using it
	}
}

// Forget drops credential's client if it is still v, so that the next Get
// makes a new one. The caller closes v.
func (c *Cache[T]) Forget(credential string, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.clients[credential]; ok && e.v == v {
		delete(c.clients, credential)
	}
}

// Len is how many clients the cache holds, open.
func (c *Cache[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.clients)
}

// Closed reports whether Close has been called.
func (c *Cache[T]) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close makes every later Get fail with cursor.ErrClosed and closes the
// cached clients, in credential order, joining their errors.
func (c *Cache[T]) Close() error {
	c.mu.Lock()
	clients := c.clients
	c.clients = make(map[string]*entry[T])
	c.closed = true
	c.mu.Unlock()
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(clients)) {
		if err := c.closeClient(clients[k].v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
