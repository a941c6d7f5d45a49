// Package clientcache keeps the cursor drivers' connections: one client
// (pool, handle, bucket) per credential, made by the first Open that needs
// it and closed, all together, by the driver's Close.
package clientcache

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/cursorflow/cursorflow/cursor"
)

// Cache holds one client of type T per credential. It is safe for
// concurrent use; the zero value is not usable, call New.
type Cache[T comparable] struct {
	closeClient func(T) error

	mu      sync.Mutex
	clients map[string]T
	closed  bool
}

// New returns an empty cache whose Close closes each client with
// closeClient.
func New[T comparable](closeClient func(T) error) *Cache[T] {
	return &Cache[T]{closeClient: closeClient, clients: make(map[string]T)}
}

// Get returns the client cached for credential or, the first time, the
// one open makes (open runs under the cache's lock, so a credential's
// client is made once). It fails with cursor.ErrClosed after Close and
// caches nothing when open fails.
func (c *Cache[T]) Get(credential string, open func() (T, error)) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero T
	if c.closed {
		return zero, cursor.ErrClosed
	}
	if v, ok := c.clients[credential]; ok {
		return v, nil
	}
	v, err := open()
	if err != nil {
		return zero, err
	}
	c.clients[credential] = v
	return v, nil
}

// Forget drops credential's client if it is still v, so that the next Get
// makes a new one. The caller closes v.
func (c *Cache[T]) Forget(credential string, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients[credential] == v {
		delete(c.clients, credential)
	}
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
	c.clients = make(map[string]T)
	c.closed = true
	c.mu.Unlock()
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(clients)) {
		if err := c.closeClient(clients[k]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
