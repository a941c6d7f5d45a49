package dsl

import (
	"fmt"
	"sort"
)

// RefsVar is the render variable under which a Refs travels with the
// variables. It is not a valid template name, so no template can read or
// shadow it.
const RefsVar = "\x00refs"

// Refs lets render variables hold references to values stored elsewhere
// (large step results in a result store, see package resultstore): a
// template that reads a variable Refs holds gets the variable with its
// references resolved; one that does not never pays for loading them.
// The engine puts one under RefsVar in the variables it renders against.
type Refs interface {
	// Holds reports whether variable name may hold references.
	Holds(name string) bool
	// Resolve returns v, the value of variable name, with every reference
	// in it replaced by the stored value. It must not change v.
	Resolve(name string, v any) (any, error)
}

// resolveRefs returns vars with the variables the template reads and refs
// holds resolved (a shallow copy; vars itself when there is nothing to
// resolve).
func (t *Template) resolveRefs(vars map[string]any) (map[string]any, error) {
	refs, ok := vars[RefsVar].(Refs)
	if !ok || len(t.names) == 0 {
		return vars, nil
	}
	var out map[string]any
	for _, name := range t.names {
		v, present := vars[name]
		if !present || !refs.Holds(name) {
			continue
		}
		r, err := refs.Resolve(name, v)
		if err != nil {
			return nil, t.fail(fmt.Errorf("read the stored value of %s: %w", name, err))
		}
		if out == nil {
			out = make(map[string]any, len(vars))
			for k, x := range vars {
				out[k] = x
			}
		}
		out[name] = r
	}
	if out == nil {
		return vars, nil
	}
	return out, nil
}

// Names returns the variable names the template reads (top-level names:
// for "{{ fetch.rows | length }}" that is fetch), sorted.
func (t *Template) Names() []string {
	if t == nil {
		return nil
	}
	return append([]string(nil), t.names...)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
