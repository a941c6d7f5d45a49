package tools

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
)

// ErrDuplicateKind is returned by Registry.Register when a tool is already
// registered for the kind.
var ErrDuplicateKind = errors.New("tools: tool kind already registered")

// Registry maps tool kinds ("http", "postgres", ...) to their Tool. It is an
// explicit value, never a package global: a host builds one, registers the
// built-in tools and its own, and hands it to the engine.
//
// Lookup is safe for concurrent use with Register, though hosts normally
// register everything before the first execution starts.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: make(map[string]Tool)}
}

// Register binds t to kind. It fails when kind is empty, t is nil (a nil
// ToolFunc too) or the kind is already taken (the error wraps
// ErrDuplicateKind).
func (r *Registry) Register(kind string, t Tool) error {
	if kind == "" {
		return errors.New("tools: register: empty kind")
	}
	// A nil ToolFunc is a non-nil Tool that panics on its first call:
	// refused here, where the mistake is made.
	if f, ok := t.(ToolFunc); t == nil || (ok && f == nil) || nilPointer(t) {
		return fmt.Errorf("tools: register %q: nil tool", kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		r.tools = make(map[string]Tool)
	}
	if _, ok := r.tools[kind]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateKind, kind)
	}
	r.tools[kind] = t
	return nil
}

// MustRegister is Register for program setup: it panics on error, which
// can only be a programming mistake (duplicate or empty kind, nil tool).
func (r *Registry) MustRegister(kind string, t Tool) {
	if err := r.Register(kind, t); err != nil {
		panic(err)
	}
}

// Lookup returns the tool registered for kind, or an error wrapping
// ErrUnknownKind that names the kind.
func (r *Registry) Lookup(kind string) (Tool, error) {
	r.mu.RLock()
	t, ok := r.tools[kind]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownKind, kind)
	}
	return t, nil
}

// Kinds returns the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	kinds := make([]string, 0, len(r.tools))
	for k := range r.tools {
		kinds = append(kinds, k)
	}
	r.mu.RUnlock()
	slices.Sort(kinds)
	return kinds
}

// nilPointer reports whether v holds a nil pointer (a typed nil in an
// interface), whose first method call would panic.
func nilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
