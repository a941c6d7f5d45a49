package engine

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/resultstore"
)

// DefaultResultCacheBytes bounds the stored results an engine or worker
// keeps decoded in memory (by their stored size).
const DefaultResultCacheBytes = 64 << 20

// resultLoadTimeout bounds one read of a stored result.
const resultLoadTimeout = time.Minute

// ErrNoResultStore is returned when a value holds a reference to a
// stored result and no result store is configured to read it.
var ErrNoResultStore = errors.New("engine: a result is in a result store, and none is configured (Config.Results, --result-store)")

// results writes large values to a result store and reads them back, with
// a cache of decoded values. A nil store keeps every value inline; a nil
// *results is a valid one without a store.
type results struct {
	store *resultstore.Store

	mu    sync.Mutex
	lru   *list.List // of *cachedResult, most recent first
	byURI map[string]*list.Element
	bytes int64
	max   int64
	group singleflight.Group
}

type cachedResult struct {
	uri  string
	v    any
	size int64
}

func newResults(store *resultstore.Store) *results {
	return &results{store: store, lru: list.New(), byURI: map[string]*list.Element{}, max: DefaultResultCacheBytes}
}

// offload returns v, or a reference to v written to the store under name
// when v's encoding is larger than threshold (the store's when negative).
func (r *results) offload(ctx context.Context, name string, v any, threshold int64) (any, error) {
	if r == nil || r.store == nil || v == nil {
		return v, nil
	}
	if threshold < 0 {
		threshold = r.store.Threshold()
	}
	b := mustJSON(v)
	if int64(len(b)) <= threshold {
		return v, nil
	}
	ref, err := r.store.Put(ctx, name, b)
	if err != nil {
		return nil, err
	}
	return ref.Marker(), nil
}

// plan is offload without the write: it returns the reference and the
// bytes to write, for decisions that must not do I/O (see pendingBlob).
func (r *results) plan(name string, v any) (any, *pendingBlob) {
	if r == nil || r.store == nil || v == nil {
		return v, nil
	}
	b := mustJSON(v)
	if int64(len(b)) <= r.store.Threshold() {
		return v, nil
	}
	ref := r.store.RefFor(name, b)
	return ref.Marker(), &pendingBlob{ref: ref, data: b}
}

// pendingBlob is a stored value a decision referred to, written before
// the decision's events are appended.
type pendingBlob struct {
	ref  resultstore.Ref
	data []byte
}

func (r *results) write(ctx context.Context, blobs []*pendingBlob) error {
	if len(blobs) == 0 {
		return nil
	}
	if r == nil || r.store == nil {
		return ErrNoResultStore
	}
	for _, b := range blobs {
		if err := r.store.Write(ctx, b.ref, b.data); err != nil {
			return err
		}
	}
	return nil
}

// load returns the stored value ref names, decoded.
func (r *results) load(ctx context.Context, ref resultstore.Ref) (any, error) {
	if r == nil || r.store == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoResultStore, ref.URI)
	}
	r.mu.Lock()
	if e := r.byURI[ref.URI]; e != nil {
		r.lru.MoveToFront(e)
		v := e.Value.(*cachedResult).v
		r.mu.Unlock()
		return v, nil
	}
	r.mu.Unlock()
	v, err, _ := r.group.Do(ref.URI, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resultLoadTimeout)
		defer cancel()
		b, err := r.store.Get(ctx, ref)
		if err != nil {
			return nil, err
		}
		var v any
		if err := unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("engine: stored result %s: %w", ref.URI, err)
		}
		r.remember(ref, v)
		return v, nil
	})
	return v, err
}

func (r *results) remember(ref resultstore.Ref, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref.Size > r.max {
		return
	}
	if _, ok := r.byURI[ref.URI]; ok {
		return
	}
	r.byURI[ref.URI] = r.lru.PushFront(&cachedResult{uri: ref.URI, v: v, size: ref.Size})
	r.bytes += ref.Size
	for r.bytes > r.max {
		last := r.lru.Back()
		c := last.Value.(*cachedResult)
		r.lru.Remove(last)
		delete(r.byURI, c.uri)
		r.bytes -= c.size
	}
}

// resolve returns v with every reference in it replaced by the stored
// value; the parts of v without references are shared, not copied.
func (r *results) resolve(ctx context.Context, v any) (any, error) {
	out, _, err := r.resolveChanged(ctx, v)
	return out, err
}

// resolveChanged is resolve that also says whether v held a reference.
func (r *results) resolveChanged(ctx context.Context, v any) (any, bool, error) {
	switch t := v.(type) {
	case map[string]any:
		if ref, ok := resultstore.RefOf(t); ok {
			x, err := r.load(ctx, ref)
			return x, true, err
		}
		if ref, ok := overlaidRef(t); ok {
			return r.resolveOverlaid(ctx, ref, t)
		}
		var out map[string]any
		for k, x := range t {
			y, changed, err := r.resolveChanged(ctx, x)
			if err != nil {
				return nil, false, err
			}
			if changed && out == nil {
				out = make(map[string]any, len(t))
				for k2, x2 := range t {
					out[k2] = x2
				}
			}
			if changed {
				out[k] = y
			}
		}
		if out != nil {
			return out, true, nil
		}
	case []any:
		var out []any
		for i, x := range t {
			y, changed, err := r.resolveChanged(ctx, x)
			if err != nil {
				return nil, false, err
			}
			if changed && out == nil {
				out = append(make([]any, 0, len(t)), t...)
			}
			if changed {
				out[i] = y
			}
		}
		if out != nil {
			return out, true, nil
		}
	}
	return v, false, nil
}

// scopeRefs is the dsl.Refs of one render scope: the variables that hold
// references, resolved through the engine's or worker's results.
type scopeRefs struct {
	r     *results
	ctx   context.Context
	names map[string]bool
}

var _ dsl.Refs = (*scopeRefs)(nil)

// Holds implements dsl.Refs.
func (s *scopeRefs) Holds(name string) bool { return s.names[name] }

// Resolve implements dsl.Refs.
func (s *scopeRefs) Resolve(name string, v any) (any, error) { return s.r.resolve(s.ctx, v) }

// overlaidRef reports whether m is a stored mapping with keys laid over
// it: a reference's marker key next to others, as stepView makes of a
// step's stored data with its task results (resolveOverlaid reads it).
func overlaidRef(m map[string]any) (resultstore.Ref, bool) {
	inner, ok := m[resultstore.MarkerKey]
	if !ok || len(m) < 2 {
		return resultstore.Ref{}, false
	}
	return resultstore.RefOf(map[string]any{resultstore.MarkerKey: inner})
}

// resolveOverlaid loads the stored value of an overlaid reference m and
// adds m's other keys (resolved) that it does not have itself; a stored
// value that is not a mapping has no room for them.
func (r *results) resolveOverlaid(ctx context.Context, ref resultstore.Ref, m map[string]any) (any, bool, error) {
	x, err := r.load(ctx, ref)
	if err != nil {
		return nil, true, err
	}
	base, ok := x.(map[string]any)
	if !ok {
		return x, true, nil
	}
	out := copyMap(base)
	for k, v := range m {
		if _, own := base[k]; own || k == resultstore.MarkerKey {
			continue
		}
		if _, alias := v.(bodyOfData); alias {
			if body, ok := base["data"]; ok {
				out[k] = body
			}
			continue
		}
		if out[k], _, err = r.resolveChanged(ctx, v); err != nil {
			return nil, true, err
		}
	}
	return out, true, nil
}

// hasRef is resultstore.HasRef that also sees an overlaid reference.
func hasRef(v any) bool {
	if m, ok := v.(map[string]any); ok {
		if _, ok := overlaidRef(m); ok {
			return true
		}
	}
	return resultstore.HasRef(v)
}

// markRefs notes in scope which of names hold references, so templates
// that read them resolve them. It adds the scope's Refs when needed.
func markRefs(ctx context.Context, scope map[string]any, r *results, names ...string) {
	var sr *scopeRefs
	for _, name := range names {
		if !hasRef(scope[name]) {
			continue
		}
		if sr == nil {
			sr = refsOf(ctx, scope, r)
		}
		sr.names[name] = true
	}
}

// refsOf returns the scope's Refs, replacing one from elsewhere (another
// process, another context) with one of r and ctx that holds the same
// names.
func refsOf(ctx context.Context, scope map[string]any, r *results) *scopeRefs {
	if sr, ok := scope[dsl.RefsVar].(*scopeRefs); ok && sr.r == r && sr.ctx == ctx {
		return sr
	}
	sr := &scopeRefs{r: r, ctx: ctx, names: map[string]bool{}}
	if old, ok := scope[dsl.RefsVar].(*scopeRefs); ok {
		for n := range old.names {
			sr.names[n] = true
		}
	}
	scope[dsl.RefsVar] = sr
	return sr
}

// localRefs gives a command's scope (from the orchestrator, in-process or
// decoded from the wire) Refs that read through the worker's results
// within the command's context.
func localRefs(ctx context.Context, scope map[string]any, r *results) {
	if _, ok := scope[dsl.RefsVar].(*scopeRefs); ok {
		refsOf(ctx, scope, r)
		return
	}
	delete(scope, dsl.RefsVar)
	names := make([]string, 0, len(scope))
	for k := range scope {
		names = append(names, k)
	}
	markRefs(ctx, scope, r, names...)
}
