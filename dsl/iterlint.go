package dsl

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// lintIterRefs warns about each template of loop step s that reads an
// attribute of iter the loop never sets: iter.jb where the iterator is
// job renders empty, as an undefined name does in Jinja, and a body that
// matches nothing looks like a success. The loop sets iter.<iterator>,
// iter._index, iter._first and iter._last (collection loops) and
// (process: frame) iter.<iterator>_rows; a set: of the step's to
// iter.<name> sets that name.
func (d *decoder) lintIterRefs(s *Step, what string) {
	if s.Loop == nil || s.Loop.Iterator == "" {
		return
	}
	it := s.Loop.Iterator
	known := map[string]bool{it: true, "_index": true, "_first": true, "_last": true, it + "_rows": true}
	var values []*Value
	walkStep(reflect.ValueOf(s), map[uintptr]bool{}, func(v *Value) { values = append(values, v) }, func(a *Assignment) {
		if rest, ok := strings.CutPrefix(a.Path, "iter."); ok {
			known[strings.SplitN(rest, ".", 2)[0]] = true
		}
	})
	type use struct {
		attr string
		pos  Pos
	}
	var unknown []use
	for _, v := range values {
		v.templates(func(at *Value, t *Template) {
			for _, attr := range t.iterAttrs {
				if !known[attr] {
					unknown = append(unknown, use{attr, at.Pos})
				}
			}
		})
	}
	// Each name once, where it is first read.
	sort.SliceStable(unknown, func(i, j int) bool { return unknown[i].pos.Compare(unknown[j].pos) < 0 })
	reported := map[string]bool{}
	for _, u := range unknown {
		if reported[u.attr] {
			continue
		}
		reported[u.attr] = true
		d.warns = append(d.warns, Diagnostic{Pos: u.pos, Warning: true, Message: fmt.Sprintf(
			"%s: iter.%s is not set by the loop (its iterator is %s: iter.%s) and renders empty", what, u.attr, it, it)})
	}
}

// templates calls f with every template below v and the value holding it.
func (v *Value) templates(f func(*Value, *Template)) {
	if v == nil {
		return
	}
	if v.tmpl != nil && v.tmpl.kind != kindConstant {
		f(v, v.tmpl)
	}
	for _, x := range v.items {
		x.templates(f)
	}
	for _, x := range v.vals {
		x.templates(f)
	}
}

var (
	typeValue      = reflect.TypeFor[*Value]()
	typeTemplate   = reflect.TypeFor[*Template]()
	typeAssignment = reflect.TypeFor[*Assignment]()
)

// walkStep visits the values and assignments reachable from x, a part of
// a step: pointers, structs, slices and maps of this package's types. A
// template held outside a value (a condition: an arc's or a rule's when)
// is visited as a value of its own.
func walkStep(x reflect.Value, seen map[uintptr]bool, value func(*Value), assign func(*Assignment)) {
	switch x.Kind() {
	case reflect.Pointer:
		if x.IsNil() {
			return
		}
		switch x.Type() {
		case typeValue:
			value(x.Interface().(*Value))
			return
		case typeTemplate:
			t := x.Interface().(*Template)
			value(&Value{Pos: t.Pos, tmpl: t})
			return
		case typeAssignment:
			a := x.Interface().(*Assignment)
			assign(a)
			value(a.Value)
			return
		}
		if x.Type().Elem().PkgPath() != typeValue.Elem().PkgPath() || seen[x.Pointer()] {
			return
		}
		seen[x.Pointer()] = true
		walkStep(x.Elem(), seen, value, assign)
	case reflect.Struct:
		if x.Type().PkgPath() != typeValue.Elem().PkgPath() {
			return
		}
		for i := range x.NumField() {
			if x.Type().Field(i).IsExported() {
				walkStep(x.Field(i), seen, value, assign)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range x.Len() {
			walkStep(x.Index(i), seen, value, assign)
		}
	case reflect.Map:
		// In any order: lintIterRefs reports by position.
		for it := x.MapRange(); it.Next(); {
			walkStep(it.Value(), seen, value, assign)
		}
	case reflect.Interface:
		if !x.IsNil() {
			walkStep(x.Elem(), seen, value, assign)
		}
	}
}

// lintTaskResultRefs warns about each template of pb that reads
// STEP.results.TASK where STEP is a pipeline step (not a loop) without a
// task named TASK: the name renders empty, and an arc on it quietly takes
// the other branch.
func (d *decoder) lintTaskResultRefs(pb *Playbook) {
	tasks := map[string][]string{}
	for _, s := range pb.Workflow {
		if !s.Pipeline || s.Loop != nil {
			continue
		}
		names := []string{}
		for _, t := range s.Tool {
			if t.Name != "" {
				names = append(names, t.Name)
			}
		}
		tasks[s.Name] = names
	}
	if len(tasks) == 0 {
		return
	}
	reported := map[[2]string]bool{}
	for _, s := range pb.Workflow {
		what := "step " + s.Name
		walkStep(reflect.ValueOf(s), map[uintptr]bool{}, func(v *Value) {
			v.templates(func(at *Value, t *Template) {
				for _, r := range t.taskRefs {
					names, ok := tasks[r[0]]
					if !ok || slices.Contains(names, r[1]) || reported[r] {
						continue
					}
					reported[r] = true
					d.warns = append(d.warns, Diagnostic{Pos: at.Pos, Warning: true, Message: fmt.Sprintf(
						"%s: %s.results.%s renders empty: step %s has no task named %s (its named tasks: %s)",
						what, r[0], r[1], r[0], r[1], strings.Join(names, ", "))})
				}
			})
		}, func(*Assignment) {})
	}
}

// lintWorkloadRefs warns about each workload.<key> a template reads that
// the playbook's workload block does not hold: a typo (workload.itemz for
// workload.items) renders empty, and a loop over it runs no item and
// succeeds. A run may add keys (--set, a parent's workload), so it is a
// warning, and a playbook without a workload block is not checked. A key
// some set: assigns (ctx.<key>) is not reported: workload and ctx are one
// store, as in NoETL. Nor is a step's name: the store holds each finished
// step's result under it, as NoETL's variables do.
func (d *decoder) lintWorkloadRefs(pb *Playbook) {
	if pb.Workload == nil {
		return
	}
	reported := map[string]bool{}
	for _, s := range pb.Workflow {
		reported[s.Name] = true
		walkStep(reflect.ValueOf(s), map[uintptr]bool{}, func(*Value) {}, func(a *Assignment) {
			if rest, ok := strings.CutPrefix(a.Path, "ctx."); ok {
				key, _, _ := strings.Cut(rest, ".")
				reported[key] = true
			}
		})
		for _, a := range s.Set {
			key, _, _ := strings.Cut(strings.TrimPrefix(a.Path, "iter."), ".")
			reported[key] = true
		}
	}
	for _, s := range pb.Workflow {
		what := "step " + s.Name
		walkStep(reflect.ValueOf(s), map[uintptr]bool{}, func(v *Value) {
			v.templates(func(at *Value, t *Template) {
				for _, key := range t.workloadAttrs {
					if _, ok := pb.Workload[key]; ok || reported[key] {
						continue
					}
					reported[key] = true
					d.warns = append(d.warns, Diagnostic{Pos: at.Pos, Warning: true, Message: fmt.Sprintf(
						"%s: workload.%s is not a key of the playbook's workload and renders empty unless the run sets it (--set %s=...)",
						what, key, key)})
				}
			})
		}, func(*Assignment) {})
	}
}

// lintConcurrentCtx warns about each set: of loop step s that updates a
// ctx key from its own value (ctx.total: '{{ ctx.total + iter.x }}')
// while the loop's items run at once: each item reads ctx as it was when
// it started, so concurrent updates overwrite each other and the total
// comes out short, silently.
func (d *decoder) lintConcurrentCtx(s *Step, what string) {
	if s.Loop == nil {
		return
	}
	switch s.Loop.Mode {
	case ModeParallel, ModeChunked, ModeFanout:
		if s.Loop.MaxInFlight == 1 {
			return
		}
	case ModeCursor:
		if s.Loop.MaxInFlight <= 1 {
			return
		}
	default:
		return
	}
	// The step's own set: runs once, after loop.done; the tasks' and the
	// loop policy's run with each item.
	reported := map[string]bool{}
	check := func(a *Assignment) {
		rest, ok := strings.CutPrefix(a.Path, "ctx.")
		if !ok || reported[a.Path] {
			return
		}
		key := strings.SplitN(rest, ".", 2)[0]
		if !a.Value.mentions("ctx."+key, "ctx['"+key+"']") {
			return
		}
		reported[a.Path] = true
		d.warns = append(d.warns, Diagnostic{Pos: a.Pos, Warning: true, Message: fmt.Sprintf(
			"%s: set %s reads ctx.%s while the loop's items run at once (mode %s): each item reads ctx as it was when it started, "+
				"so their updates overwrite each other; return each item's part and combine the loop's results after loop.done", what, a.Path, key, s.Loop.Mode)})
	}
	seen := map[uintptr]bool{}
	walkStep(reflect.ValueOf(s.Tool), seen, func(*Value) {}, check)
	walkStep(reflect.ValueOf(s.Loop.Policy), seen, func(*Value) {}, check)
}

// lintLoopStepSetIter warns about each set: of loop step s itself that
// reads iter: the step's own set runs once, after loop.done, where no
// item is current and iter renders empty; per item, a task's set runs.
func (d *decoder) lintLoopStepSetIter(s *Step, what string) {
	if s.Loop == nil {
		return
	}
	for _, a := range s.Set {
		if a.Value.mentions("iter.", "iter[") {
			d.warns = append(d.warns, Diagnostic{Pos: a.Pos, Warning: true, Message: fmt.Sprintf(
				"%s: set %s reads iter, but a loop step's own set: runs once, after loop.done, where iter is empty; "+
					"to set it per item, put the set: under the tool's task", what, a.Path)})
		}
	}
}

// mentions reports whether the source of a template below v contains one
// of texts: a lint's cheap test of what a template reads.
func (v *Value) mentions(texts ...string) bool {
	found := false
	v.templates(func(_ *Value, t *Template) {
		for _, x := range texts {
			found = found || strings.Contains(t.Source, x)
		}
	})
	return found
}

// lintSetStepScope warns about each step.<name> that step s's own set:
// or one of its arcs' writes. NoETL's set: writes step.x, as it does
// ctx.x and iter.x, as the execution variable x; here those set:s store
// step.x under ctx.step, so the {{ x }} (or {{ ctx.x }}) a NoETL playbook
// reads next renders empty. A task's set: is not linted: there step.x is
// a name of the pipeline's, which its later tasks read as step.x.
func (d *decoder) lintSetStepScope(s *Step, what string) {
	check := func(list []*Assignment, where string) {
		for _, a := range list {
			rest, ok := strings.CutPrefix(a.Path, "step.")
			if !ok || rest == "" {
				continue
			}
			d.warns = append(d.warns, Diagnostic{Pos: a.Pos, Warning: true, Message: fmt.Sprintf(
				"%s: set %s: NoETL stores it as %s (ctx.%s); here it goes under ctx.step, and {{ %s }} and {{ ctx.%s }} render empty: write ctx.%s",
				where, a.Path, rest, rest, rest, rest, rest)})
		}
	}
	check(s.Set, what)
	if s.Next != nil {
		for _, arc := range s.Next.Arcs {
			check(arc.Set, fmt.Sprintf("%s: arc to %s", what, arc.Step))
		}
	}
}
