package cursor

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
)

// Registry maps cursor kinds to drivers. It is explicit (a host builds
// one and hands it to the engine) and safe for concurrent use. Adding a
// source to a host is one Register call; the engine needs no change.
type Registry struct {
	mu      sync.RWMutex
	drivers map[string]Driver
	closed  bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{drivers: make(map[string]Driver)}
}

// Register makes d the driver of kind. A kind can be registered once;
// registering it again returns an error wrapping ErrDuplicateKind, and
// registering after Close returns ErrClosed.
func (r *Registry) Register(kind string, d Driver) error {
	if kind == "" {
		return errors.New("cursor: register: empty kind")
	}
	if d == nil || nilPointer(d) {
		return fmt.Errorf("cursor: register %q: nil driver", kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("cursor: register %q: %w", kind, ErrClosed)
	}
	if _, ok := r.drivers[kind]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateKind, kind)
	}
	r.drivers[kind] = d
	return nil
}

// Lookup returns the driver of kind, or an error wrapping ErrUnknownKind
// that names the kind and the registered kinds.
func (r *Registry) Lookup(kind string) (Driver, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return nil, fmt.Errorf("cursor: lookup %q: %w", kind, ErrClosed)
	}
	d, ok := r.drivers[kind]
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %v)", ErrUnknownKind, kind, r.kindsLocked())
	}
	return d, nil
}

// Kinds returns the registered kinds in sorted order.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.kindsLocked()
}

func (r *Registry) kindsLocked() []string {
	kinds := make([]string, 0, len(r.drivers))
	for k := range r.drivers {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// Close closes every registered driver (in kind order) and empties the
// registry. It returns the drivers' errors joined; a second Close is a
// no-op.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	kinds := r.kindsLocked()
	drivers := r.drivers
	r.drivers = make(map[string]Driver)
	r.mu.Unlock()

	var errs []error
	for _, k := range kinds {
		if err := drivers[k].Close(); err != nil {
			errs = append(errs, fmt.Errorf("cursor: close %q: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// TemplateOptioner is implemented by drivers that render some of their
// options themselves, per call, with variables only the driver knows (the
// SQL drivers' ack, release and dead_letter statements see {{ keys }} and
// {{ rows }}). The engine must pass the option keys it names in
// Spec.Options as written in the playbook, unrendered.
type TemplateOptioner interface {
	TemplateOptions() []string
}

// OptionKeyLister is implemented by drivers whose options are a closed
// set: OptionKeys lists every key of Spec.Options the driver reads. The
// engine's lint (engine.LintCursors) warns about a cursor block's other
// keys, which the driver ignores: a typo such as relase for release would
// otherwise leave failed rows claimed without a word. The engine's own
// url option need not be listed. Like a tool's unread keys, these only
// warn.
type OptionKeyLister interface {
	// OptionKeys returns the option keys the driver reads. The caller may
	// keep and change the slice.
	OptionKeys() []string
}

// nilPointer reports whether v holds a nil pointer (a typed nil in an
// interface), whose first method call would panic.
func nilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
