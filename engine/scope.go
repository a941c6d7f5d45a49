package engine

import (
	"context"
	"slices"
	"strings"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/resultstore"
)

// scope builds the render context of the execution as it stands: workload
// keys at top level and under workload, each finished step's result data
// under its name (as NoETL does: a postgres step's rows are
// step_name.rows, an http step's body step_name.data), ctx, vars and
// execution_id. Under semanticsOneStore, workload and ctx are one store,
// as NoETL's state.variables (its render context's ctx, workload and
// top-level names): a key set with `set: ctx.page` is read as page,
// ctx.page and workload.page, and ctx.<workload key> reads the workload;
// a step's result still takes its name over a variable's. The maps it
// returns are fresh; the values inside are never mutated after they enter
// the state, so a scope may be handed to workers running concurrently.
func (s *State) scope() map[string]any {
	m, steps := s.commandScope()
	layStepVars(m, steps)
	return m
}

// commandScope is scope without the steps' results laid into ctx and
// workload, and the names of the steps to lay there (layStepVars): a
// command carries the scope so (Command.StepVars), each result once.
func (s *State) commandScope() (map[string]any, []string) {
	m := make(map[string]any, len(s.Workload)+len(s.Ctx)+len(s.Results)+8)
	for k, v := range s.Workload {
		m[k] = v
	}
	if s.semantics >= semanticsOneStore {
		m["workload"] = s.Workload
		oneStore(m, s.Ctx, nil)
	} else {
		m["workload"], m["ctx"] = s.Workload, copyMap(s.Ctx)
	}
	if v, ok := s.Ctx["loop_index"]; ok && s.semantics >= semanticsCallDone {
		// The last loop's, kept as NoETL's variables keep it
		// (decider.keepLastItem); an item's own replaces it.
		m["loop_index"] = v
	}
	if s.views == nil {
		s.views = make(map[string]any, len(s.Results))
	}
	for k, v := range s.Results {
		view, ok := s.views[k]
		if !ok {
			view = stepView(v, s.semantics)
			s.views[k] = view
		}
		m[k] = view
	}
	var steps []string
	if s.semantics >= semanticsStepView && len(s.Results) > 0 {
		// NoETL's mark_step_completed writes a step's result into its
		// variables too: ctx.<step> and workload.<step> read it, unless
		// set: gave ctx a value of that name.
		steps = make([]string, 0, len(s.Results))
		for k := range s.Results {
			if _, set := s.Ctx[k]; !set {
				steps = append(steps, k)
			}
		}
		slices.Sort(steps)
	}
	m["vars"] = copyMap(s.Vars)
	m["execution_id"] = s.ExecutionID
	if s.parent != "" {
		m["parent_execution_id"] = s.parent
	}
	if len(s.refNames) > 0 {
		sr := &scopeRefs{r: s.res, ctx: context.Background(), names: make(map[string]bool, len(s.refNames))}
		for n := range s.refNames {
			sr.names[n] = true
		}
		if sr.names["ctx"] && s.semantics >= semanticsOneStore {
			// ctx's references are read through its other names too.
			for k, v := range s.Ctx {
				if resultstore.HasRef(v) && !isResult(s.Results, k) {
					sr.names[k] = true
				}
			}
			sr.names["workload"] = true
		}
		if s.semantics >= semanticsStepView {
			// ctx and workload hold the steps' results too.
			for n := range s.refNames {
				if isResult(s.Results, n) {
					sr.names["ctx"], sr.names["workload"] = true, true
					break
				}
			}
		}
		m[dsl.RefsVar] = sr
	}
	return m, steps
}

// layStepVars lays the results of steps, read from scope m under their
// names, into its ctx and workload (one store): a fresh map, so that the
// workload the scope was built from is left as it is.
func layStepVars(m map[string]any, steps []string) {
	if len(steps) == 0 {
		return
	}
	views := make(map[string]any, len(steps))
	for _, k := range steps {
		views[k] = m[k]
	}
	wl := overlay(m["workload"], views)
	m["workload"], m["ctx"] = wl, wl
}

// commandScope is the scope a worker renders cmd with: a copy of
// cmd.Scope with the steps' results laid into ctx and workload
// (Command.StepVars).
func (cmd *Command) commandScope() map[string]any {
	sc := copyMap(cmd.Scope)
	layStepVars(sc, cmd.StepVars)
	return sc
}

func isResult(results map[string]any, name string) bool {
	_, ok := results[name]
	return ok
}

// oneStore lays ctx over the workload in scope, as NoETL's one variable
// store: under ctx and workload (both the store) and at top level, except
// for a name scope holds for something else (taken, or one of
// scopeNames): a step's result, an argument, output, ...
func oneStore(scope map[string]any, ctx map[string]any, taken func(string) bool) {
	for k, v := range ctx {
		if _, reserved := scopeNames[k]; reserved || (taken != nil && taken(k)) {
			continue
		}
		scope[k] = v
	}
	wl, _ := scope["workload"].(map[string]any)
	store := overlay(wl, ctx)
	scope["workload"] = store
	scope["ctx"] = store
}

// scopeNames are the names a render context keeps for itself, which no
// variable takes at top level.
var scopeNames = map[string]struct{}{
	"workload": {}, "ctx": {}, "vars": {}, "execution_id": {}, "parent_execution_id": {}, dsl.RefsVar: {},
	"iter": {}, "loop_index": {}, "event": {}, "output": {}, "result": {}, "args": {}, "input": {}, "fanin": {},
}

// addArgs exposes a step's arguments (step args rendered by the worker, or
// an arc's args) at top level and under args and input.
func addArgs(scope map[string]any, args map[string]any) {
	if len(args) == 0 {
		return
	}
	for k, v := range args {
		scope[k] = v
	}
	scope["args"] = args
	scope["input"] = args
}

func copyMap(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// overlay returns a copy of base (a map, or nil) with delta's keys on top.
func overlay(base any, delta map[string]any) map[string]any {
	b, _ := base.(map[string]any)
	c := make(map[string]any, len(b)+len(delta))
	for k, v := range b {
		c[k] = v
	}
	for k, v := range delta {
		c[k] = v
	}
	return c
}

// assign renders step- or arc-level set entries into ctx and vars deltas.
// "ctx.a.b" sets a nested key without touching a's other keys; "vars.x"
// goes to vars; any other path is stored in ctx under the path as written
// (without an "iter." prefix, which means nothing outside a loop body).
func assign(list []*dsl.Assignment, scope map[string]any, ctx, vars map[string]any) error {
	for _, a := range list {
		x, err := a.Value.Render(scope)
		if err != nil {
			return err
		}
		ns, rest := splitNamespace(a.Path)
		switch ns {
		case "vars":
			setPath(vars, scope["vars"], rest, x)
		case "ctx":
			setPath(ctx, scope["ctx"], rest, x)
		default:
			setPath(ctx, scope["ctx"], strings.TrimPrefix(a.Path, "iter."), x)
		}
	}
	return nil
}

func splitNamespace(path string) (ns, rest string) {
	if i := strings.IndexByte(path, '.'); i > 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}

// setPath sets dotted path in delta. A nested path copies the current
// value (from delta, else from current) on the way down, so no map that a
// scope or the state already shares is mutated.
func setPath(delta map[string]any, current any, path string, v any) {
	head, tail, nested := strings.Cut(path, ".")
	if !nested {
		delta[head] = v
		return
	}
	var base any
	if x, ok := delta[head]; ok {
		base = x
	} else if cm, ok := current.(map[string]any); ok {
		base = cm[head]
	}
	child := overlay(base, nil)
	setPath(child, base, tail, v)
	delta[head] = child
}

// stepView is what a finished step's name stands for in templates, under
// the execution's semantics: its result's data, with a pipeline's task
// results (withTaskResults) under results when the data is a mapping
// without a key of that name (or is null), as NoETL's
// step.results.<task>. From semanticsStepView on, the result's status and
// error are laid over it too (withStatus), and a collection loop (whose
// result records stats) reads as NoETL's aggregate {results, stats}.
func stepView(v any, semantics int) (view any) {
	data := resultData(v)
	m, _ := v.(map[string]any)
	if semantics >= semanticsStepView {
		if stats, ok := m["stats"]; ok {
			// Only a collection loop's result records stats (loopResult).
			return withStatus(map[string]any{"results": data, "stats": stats}, m)
		}
		defer func() { view = withStatus(view, m) }()
	}
	if _, isHTTP := m["http"]; isHTTP {
		data = withBody(data)
	}
	tr, ok := m["tasks"].(map[string]any)
	if !ok {
		return data
	}
	if task, _ := m["task"].(string); task != "" {
		tr = overlay(tr, map[string]any{task: data})
	}
	switch d := data.(type) {
	case nil:
		return map[string]any{"results": tr}
	case map[string]any:
		// Stored data gets results laid over its reference, added when it
		// is read unless it has its own (overlaidRef).
		if _, taken := d["results"]; !taken {
			return overlay(d, map[string]any{"results": tr})
		}
	}
	return data
}

// withStatus lays a result envelope's status, and its error when it has
// one, over a step's view as NoETL's hydrated step result carries them
// (_merge_hydrated_step_result: setdefault), so that {{ step.status }}
// and {{ step.error }} work after any tool. Keys of the data's own win; a
// view that is not a mapping (a list, a scalar) has no room for them.
func withStatus(view any, envelope map[string]any) any {
	if envelope == nil {
		return view
	}
	d, ok := view.(map[string]any)
	if view == nil {
		// No data: NoETL's result still has its status.
		d, ok = map[string]any{}, true
	}
	if !ok {
		return view
	}
	add := make(map[string]any, 2)
	if st, ok := envelope["status"]; ok && st != nil {
		add["status"] = st
	}
	if e := envelope["error"]; e != nil {
		add["error"] = e
	}
	for k := range add {
		if _, own := d[k]; own {
			delete(add, k)
		}
	}
	if len(add) == 0 {
		if view == nil {
			return nil
		}
		return view
	}
	// A stored mapping's own keys are known once it is read:
	// resolveOverlaid keeps them over these.
	return overlay(d, add)
}

// withBody gives an http result's data {status_code, headers, data} the
// response body under body too, as NoETL's newer (Rust) http tool answers
// it: playbooks written for it read STEP.body, those for the Python tool
// (and the PFT flow) STEP.data. Only templates see it; the result is
// stored once.
func withBody(data any) any {
	d, ok := data.(map[string]any)
	if !ok {
		return data
	}
	if _, taken := d["body"]; taken {
		return data
	}
	_, stored := resultstore.RefOf(d)
	if _, overlaid := overlaidRef(d); stored || overlaid {
		// Stored data: the body is its data key, known once it is read
		// (resolveOverlaid).
		return overlay(d, map[string]any{"body": bodyOfData{}})
	}
	body, ok := d["data"]
	if !ok {
		return data
	}
	return overlay(d, map[string]any{"body": body})
}

// bodyOfData stands, in a stored http result's view (withBody), for the
// stored value's data key: resolveOverlaid puts that in its place.
type bodyOfData struct{}

// resultData returns the data of a result envelope {status, data, error}.
func resultData(v any) any {
	if m, ok := v.(map[string]any); ok {
		if d, ok := m["data"]; ok {
			return d
		}
	}
	return v
}
