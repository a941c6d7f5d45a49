package dsl

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// lintIterRefs warns about each template of loop step s that reads an
// attribute of iter the loop never sets: iter.jb where the iterator is
// job renders empty, as an undefined name does in Jinja, and a body that
// matches nothing looks like a success. The loop sets iter.<iterator>,
// iter._index and (process: frame) iter.<iterator>_rows; a set: of the
// step's to iter.<name> sets that name.
func (d *decoder) lintIterRefs(s *Step, what string) {
	if s.Loop == nil || s.Loop.Iterator == "" {
		return
	}
	it := s.Loop.Iterator
	known := map[string]bool{it: true, "_index": true, it + "_rows": true}
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
	sort.SliceStable(unknown, func(i, j int) bool { return comparePos(unknown[i].pos, unknown[j].pos) < 0 })
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
	typeAssignment = reflect.TypeFor[*Assignment]()
)

// walkStep visits the values and assignments reachable from x, a part of
// a step: pointers, structs, slices and maps of this package's types.
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
