package dsl

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2/exec"

	"github.com/cursorflow/cursorflow/internal/jsonnum"
	"github.com/cursorflow/cursorflow/internal/plainjson"
)

// Value is a YAML value with compiled templates at its string leaves.
// Render walks it and returns plain Go values: map[string]any, []any,
// string, int64/float64, bool, nil.
//
// Build values with NewScalarValue, NewLiteralValue, NewListValue and
// NewMapValue. A Value is immutable once built and safe for concurrent
// use. Render always returns values the caller owns: maps and lists are
// freshly allocated on every call.
type Value struct {
	Pos Pos

	kind valueKind
	// tmpl is set for string scalars (constant or template).
	tmpl *Template
	// lit is a literal scalar, or the cached plain value of a constant.
	lit   any
	items []*Value
	keys  []string
	vals  []*Value
	// constant: no template anywhere below; lit holds the rendered value.
	constant bool
}

type valueKind uint8

const (
	valueScalar valueKind = iota // string scalar, maybe a template
	valueLiteral
	valueList
	valueMap
)

// NewScalarValue builds a string scalar, compiling it as a template when
// it contains {{ or {%. pos is the position of the string's first content
// character, as CompileTemplate documents; a syntax error is a
// *Diagnostic.
func NewScalarValue(s string, pos Pos) (*Value, error) {
	return newScalarValue(s, pos, nil)
}

func newScalarValue(s string, pos Pos, lim *limitsRef) (*Value, error) {
	t, err := compileTemplate(s, pos, lim)
	if err != nil {
		return nil, err
	}
	return scalarValue(s, pos, t), nil
}

// scalarValue is the Value of the string scalar s compiled as t.
func scalarValue(s string, pos Pos, t *Template) *Value {
	v := &Value{Pos: pos, kind: valueScalar, tmpl: t}
	if t.kind == kindConstant {
		v.constant = true
		v.lit = s
	}
	return v
}

// NewLiteralValue builds a non-string scalar (int64, float64, bool, nil).
// Other integer and float kinds are normalised to int64 and float64. A
// string is kept as a constant string and never compiled; a map or list is
// copied into plain values and kept as a constant.
func NewLiteralValue(v any, pos Pos) *Value {
	p, err := plainOf(v, 0)
	if err != nil {
		p = fmt.Sprint(v)
	}
	return &Value{Pos: pos, kind: valueLiteral, lit: p, constant: true}
}

// NewListValue builds a list of values. Nil items render as nil.
func NewListValue(items []*Value, pos Pos) *Value {
	v := &Value{Pos: pos, kind: valueList, items: slices.Clone(items)}
	return v.foldConstant(v.items)
}

// NewMapValue builds a map keeping the keys' order for Raw and Keys. keys
// and vals pair up by index; entries beyond the shorter slice are
// ignored, and a repeated key keeps its last value.
func NewMapValue(keys []string, vals []*Value, pos Pos) *Value {
	n := min(len(keys), len(vals))
	v := &Value{Pos: pos, kind: valueMap, keys: slices.Clone(keys[:n]), vals: slices.Clone(vals[:n])}
	return v.foldConstant(v.vals)
}

// foldConstant marks the list or map v constant when every one of its
// children (nil counts as constant) is, rendering it once for good, and
// returns v.
func (v *Value) foldConstant(children []*Value) *Value {
	v.constant = true
	for _, it := range children {
		if it != nil && !it.constant {
			v.constant = false
		}
	}
	if v.constant {
		v.lit, _ = v.renderSlow(nil)
	}
	return v
}

// Template returns the compiled template of a string scalar holding
// template syntax, nil otherwise.
func (v *Value) Template() *Template {
	if v == nil || v.kind != valueScalar || v.tmpl == nil || v.tmpl.kind == kindConstant {
		return nil
	}
	return v.tmpl
}

// IsConstant reports whether v holds no template anywhere; such a value
// renders without evaluating anything.
func (v *Value) IsConstant() bool { return v == nil || v.constant }

// Keys returns a map value's keys in source order; nil for other values.
func (v *Value) Keys() []string {
	if v == nil || v.kind != valueMap {
		return nil
	}
	return slices.Clone(v.keys)
}

// Get returns the value under key in a map value, or nil.
func (v *Value) Get(key string) *Value {
	if v == nil || v.kind != valueMap {
		return nil
	}
	for i := len(v.keys) - 1; i >= 0; i-- {
		if v.keys[i] == key {
			return v.vals[i]
		}
	}
	return nil
}

// Items returns a list value's items; nil for other values.
func (v *Value) Items() []*Value {
	if v == nil || v.kind != valueList {
		return nil
	}
	return slices.Clone(v.items)
}

// Render renders every template inside v against vars.
//
// An error names the failing element's path inside v (key.sub[2]: ...)
// and wraps the *RenderError of the template; callers add their own
// context (step, field) by wrapping it again.
func (v *Value) Render(vars map[string]any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if v.constant {
		return copyPlain(v.lit), nil
	}
	return v.renderSlow(vars)
}

func (v *Value) renderSlow(vars map[string]any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch v.kind {
	case valueScalar:
		return v.tmpl.Render(vars)
	case valueLiteral:
		return copyPlain(v.lit), nil
	case valueList:
		out := make([]any, len(v.items))
		for i, it := range v.items {
			r, err := it.Render(vars)
			if err != nil {
				return nil, atPath("["+strconv.Itoa(i)+"]", err)
			}
			out[i] = r
		}
		return out, nil
	default:
		out := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			r, err := v.vals[i].Render(vars)
			if err != nil {
				return nil, atPath(k, err)
			}
			out[k] = r
		}
		return out, nil
	}
}

// PathError locates a render failure inside a map or list value.
type PathError struct {
	// Path is the dotted path to the failing element, e.g. "body.rows[2]".
	Path string
	Err  error
}

// Error formats the error as path: cause.
func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *PathError) Unwrap() error { return e.Err }

func atPath(step string, err error) error {
	// Only a bare PathError is extended; a wrapped one stays the cause so
	// its wrapper's context is kept.
	if pe, ok := err.(*PathError); ok { //nolint:errorlint // deliberately not errors.As, see above
		sep := "."
		if strings.HasPrefix(pe.Path, "[") {
			sep = ""
		}
		return &PathError{Path: step + sep + pe.Path, Err: pe.Err}
	}
	return &PathError{Path: step, Err: err}
}

// Raw returns the value as written in the playbook, templates unrendered.
func (v *Value) Raw() any {
	if v == nil {
		return nil
	}
	switch v.kind {
	case valueScalar:
		return v.tmpl.Source
	case valueLiteral:
		return copyPlain(v.lit)
	case valueList:
		out := make([]any, len(v.items))
		for i, it := range v.items {
			out[i] = it.Raw()
		}
		return out
	default:
		out := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			out[k] = v.vals[i].Raw()
		}
		return out
	}
}

// RenderMap renders each value of m; a nil or empty map renders to an
// empty, non-nil map.
//
// When several values fail, the error reported is the one under the
// smallest key, so failures are deterministic. The error is a *PathError
// naming that key.
func RenderMap(m map[string]*Value, vars map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	var failed []string
	for k, v := range m {
		r, err := v.Render(vars)
		if err != nil {
			failed = append(failed, k)
			continue
		}
		out[k] = r
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		_, err := m[failed[0]].Render(vars)
		return nil, atPath(failed[0], err)
	}
	return out, nil
}

// copyPlain deep-copies the maps and lists of a plain value.
func copyPlain(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyPlain(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = copyPlain(e)
		}
		return out
	}
	return v
}

// maxDepth bounds nesting when converting values, so a cyclic structure
// fails instead of overflowing the stack.
const maxDepth = 1000

// toPlain converts a gonja value to plain Go values.
func toPlain(v *exec.Value) (any, error) {
	if v == nil {
		return nil, nil
	}
	return plainOf(v.Interface(), 0)
}

// plainOf converts x to plain Go values (nil, bool, int64, float64,
// string, []any, map[string]any), always copying maps and lists.
func plainOf(x any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deeply (cyclic?)")
	}
	switch x := x.(type) {
	case nil:
		return nil, nil
	case string, bool, int64, float64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case json.Number:
		return jsonnum.Number(x), nil
	case *exec.Value:
		if x == nil {
			return nil, nil
		}
		return plainOf(x.Interface(), depth+1)
	case []any:
		return plainList(x, depth)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			p, err := plainOf(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = p
		}
		return out, nil
	case exec.ValuesList:
		return plainList(x, depth)
	case *exec.Dict:
		if x == nil {
			return nil, nil
		}
		return dictPlain(x, depth)
	case exec.Dict:
		return dictPlain(&x, depth)
	case error:
		return nil, x
	case []byte:
		return string(x), nil
	case fmt.Stringer:
		if rv := reflect.ValueOf(x); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return nil, nil
		}
		if _, ok := x.(interface{ Format(string) string }); ok { // time.Time and friends
			return x.String(), nil
		}
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return float64(u), nil
		}
		return int64(u), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		if !rv.Elem().CanInterface() {
			break
		}
		return plainOf(rv.Elem().Interface(), depth+1)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			e := rv.Index(i)
			if !e.CanInterface() {
				return nil, fmt.Errorf("cannot convert %T to a plain value", x)
			}
			p, err := plainOf(e.Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			if !it.Key().CanInterface() || !it.Value().CanInterface() {
				return nil, fmt.Errorf("cannot convert %T to a plain value", x)
			}
			k, err := plainOf(it.Key().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			ks, err := formatString(k)
			if err != nil {
				return nil, err
			}
			p, err := plainOf(it.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[ks] = p
		}
		return out, nil
	}
	if s, ok := x.(fmt.Stringer); ok {
		return s.String(), nil
	}
	return nil, fmt.Errorf("cannot use a value of type %T as data", x)
}

// plainList converts each element of a list with plainOf.
func plainList[E any](x []E, depth int) (any, error) {
	out := make([]any, len(x))
	for i, e := range x {
		p, err := plainOf(e, depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

func dictPlain(d *exec.Dict, depth int) (any, error) {
	out := make(map[string]any, len(d.Pairs))
	for _, p := range d.Pairs {
		if p == nil {
			continue
		}
		k, err := plainOf(p.Key, depth+1)
		if err != nil {
			return nil, err
		}
		ks, err := formatString(k)
		if err != nil {
			return nil, err
		}
		val, err := plainOf(p.Value, depth+1)
		if err != nil {
			return nil, err
		}
		out[ks] = val
	}
	return out, nil
}

// pyFloatString formats f as Python's str(float): 1.0, 0.1, 1e+20, inf.
func pyFloatString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return pyFloatRepr(f)
}

func pyFloatRepr(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	// Python switches to exponent notation outside [1e-4, 1e16); Go
	// prints the exponent form (1e+20, 1.5e-07) exactly as Python does.
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// marshalJSON encodes a plain value the way Jinja's tojson (Python's
// json.dumps with sort_keys=True) lays it out: keys sorted, ", " and ": "
// separators, floats as Python prints them. Unlike Jinja it does not
// escape <, >, & or ' (playbooks embed the JSON in SQL and double the
// quotes themselves) and keeps non-ASCII text as UTF-8. indent > 0 pretty
// prints with that many spaces.
func marshalJSON(v any, indent int) (string, error) {
	var b []byte
	switch x := v.(type) {
	case []any:
		if len(x) > 0 {
			// Room for the first element; appendJSON sizes the rest on it.
			b = make([]byte, 0, 64)
		}
	case map[string]any:
		if len(x) > 0 {
			// A row's few columns, without growing from a few bytes.
			b = make([]byte, 0, 64)
		}
	}
	b, err := appendJSON(b, v, indent, 0, 0)
	if err != nil {
		return "", err
	}
	// b is never written again: the string shares its bytes, as
	// strings.Builder's does.
	return unsafe.String(unsafe.SliceData(b), len(b)), nil
}

// scratchBuf is a reused buffer for text that is copied out once built
// (a fast-path render, the JSON sql_literal quotes there).
type scratchBuf struct{ b []byte }

var scratchPool = sync.Pool{New: func() any { return &scratchBuf{b: make([]byte, 0, 512)} }}

// maxScratch is the largest buffer kept for reuse: one that grew past it
// for a large value is let go, not held by the pool.
const maxScratch = 1 << 20

func getScratch() *scratchBuf { return scratchPool.Get().(*scratchBuf) }

func putScratch(s *scratchBuf) {
	if cap(s.b) <= maxScratch {
		scratchPool.Put(s)
	}
}

// appendJSON appends marshalJSON's text of v to b. It appends to a slice
// held in a local variable, not through a *strings.Builder: a builder on
// the heap takes a GC write barrier at every write while a collection
// runs, which was a quarter of tojson's time over a frame's rows.
func appendJSON(b []byte, v any, indent, level, depth int) ([]byte, error) {
	if depth > maxDepth {
		return b, errors.New("tojson: value nested too deeply (cyclic?)")
	}
	newline := func(b []byte, l int) []byte {
		if indent > 0 {
			b = append(b, '\n')
			for range indent * l {
				b = append(b, ' ')
			}
		}
		return b
	}
	sep := ", "
	if indent > 0 {
		sep = ","
	}
	var err error
	switch x := v.(type) {
	case nil:
		b = append(b, "null"...)
	case bool:
		if x {
			b = append(b, "true"...)
		} else {
			b = append(b, "false"...)
		}
	case int64:
		b = strconv.AppendInt(b, x, 10)
	case float64:
		switch {
		case math.IsNaN(x):
			b = append(b, "NaN"...)
		case math.IsInf(x, 1):
			b = append(b, "Infinity"...)
		case math.IsInf(x, -1):
			b = append(b, "-Infinity"...)
		default:
			b = append(b, pyFloatRepr(x)...)
		}
	case string:
		b = appendJSONString(b, x)
	case []any:
		if len(x) == 0 {
			return append(b, "[]"...), nil
		}
		b = append(b, '[')
		start := len(b)
		for i, e := range x {
			if i == 1 && depth == 0 {
				// A frame's rows are alike: one growth for the rest of
				// the list, sized on its first element with an eighth to
				// spare, not one at every doubling. At most 1 MiB: a
				// list whose first element is its largest is not to
				// reserve many times what it takes.
				b = grow(b, min((len(b)-start+len(sep)+1)*(len(x)-1)*9/8+16, 1<<20))
			}
			if i > 0 {
				b = append(b, sep...)
			}
			b = newline(b, level+1)
			if b, err = appendJSON(b, e, indent, level+1, depth+1); err != nil {
				return b, err
			}
		}
		b = newline(b, level)
		b = append(b, ']')
	case map[string]any:
		if len(x) == 0 {
			return append(b, "{}"...), nil
		}
		// A row's columns: no allocation. The values are taken with the
		// keys, not looked up again once sorted.
		var small [8]plainjson.Member
		members := small[:0]
		for k, e := range x {
			members = append(members, plainjson.Member{Key: k, Value: e})
		}
		plainjson.SortMembers(members)
		b = append(b, '{')
		for i, m := range members {
			if i > 0 {
				b = append(b, sep...)
			}
			b = newline(b, level+1)
			b = appendJSONString(b, m.Key)
			b = append(b, ": "...)
			if b, err = appendJSON(b, m.Value, indent, level+1, depth+1); err != nil {
				return b, err
			}
		}
		b = newline(b, level)
		b = append(b, '}')
	default:
		p, err := plainOf(v, depth+1)
		if err != nil {
			return b, err
		}
		switch p.(type) {
		case nil, bool, int64, float64, string, []any, map[string]any:
			return appendJSON(b, p, indent, level, depth+1)
		}
		return b, fmt.Errorf("tojson: cannot encode %T", v)
	}
	return b, nil
}

// grow returns b with room for n more bytes. It is slices.Grow, less the
// race detector's build of it, which allocates n bytes more.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	g := make([]byte, len(b), len(b)+n)
	copy(g, b)
	return g
}

const hexDigits = "0123456789abcdef"

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		// A run of bytes that stand for themselves goes in at once.
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] < 0x7f && s[j] != '"' && s[j] != '\\' {
			j++
		}
		if j > i {
			b = append(b, s[i:j]...)
			if i = j; i == len(s) {
				break
			}
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b = append(b, `\"`...)
			case c == '\\':
				b = append(b, `\\`...)
			case c == '\n':
				b = append(b, `\n`...)
			case c == '\r':
				b = append(b, `\r`...)
			case c == '\t':
				b = append(b, `\t`...)
			case c == '\b':
				b = append(b, `\b`...)
			case c == '\f':
				b = append(b, `\f`...)
			case c < 0x20 || c == 0x7f:
				b = append(b, `\u00`...)
				b = append(b, hexDigits[c>>4])
				b = append(b, hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028':
			b = append(b, `\u2028`...)
		case r == '\u2029':
			b = append(b, `\u2029`...)
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
