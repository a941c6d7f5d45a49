package dsl

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxAliasNodes bounds how many YAML nodes one playbook may visit through
// aliases, so that a "billion laughs" document is rejected instead of
// exhausting memory and time. Nodes written out in full do not count: the
// input's size bounds them.
const maxAliasNodes = 1 << 17

// decoder turns a yaml.Node tree into a Playbook, collecting every problem
// instead of stopping at the first.
type decoder struct {
	file  string
	src   []byte
	lines []string // src split into lines, built on first use

	errs     ErrorList
	warns    []Diagnostic
	refusals []Diagnostic
	notes    []Diagnostic

	toolKeyed map[*Step]bool // steps that have a tool: key, even a broken one
	// loopLimits holds the max_in_flight and chunk_size keys each loop
	// wrote, for lintLoopLimits once the step has settled the loop's mode.
	loopLimits map[*Loop][]limitKey

	budget    int                 // nodes the value converters may still visit
	overBudge bool                // the budget error was reported
	expanding map[*yaml.Node]bool // aliases being expanded (cycle detection)

	limits *limitsRef // shared by the playbook's templates

	// compiled holds each template scalar's compilation, so that the
	// aliases of one (*t repeated) share it: compiled once per alias, a
	// template of 100 KB under 300 aliases took 5 GB and 20 seconds.
	compiled map[*yaml.Node]compiledTemplate
}

// compiledTemplate is a template scalar's compilation: the template or
// its error.
type compiledTemplate struct {
	t   *Template
	err error
}

// compile compiles the template scalar n (alias resolved) once, however
// many aliases name it.
func (d *decoder) compile(n *yaml.Node, src string) (*Template, error) {
	if c, ok := d.compiled[n]; ok {
		return c.t, c.err
	}
	t, err := compileTemplate(src, d.textPos(n), d.limits)
	if d.compiled == nil {
		d.compiled = map[*yaml.Node]compiledTemplate{}
	}
	d.compiled[n] = compiledTemplate{t, err}
	return t, err
}

func newDecoder(file string, src []byte) *decoder {
	return &decoder{file: file, src: src, budget: maxAliasNodes, limits: &limitsRef{}}
}

// pair is one key/value entry of a YAML mapping.
type pair struct {
	key  string
	k, v *yaml.Node
}

func (d *decoder) pos(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: d.file}
	}
	return Pos{File: d.file, Line: n.Line, Col: n.Column}
}

func (d *decoder) errorAt(p Pos, format string, args ...any) {
	d.errs = append(d.errs, &Diagnostic{Pos: p, Message: fmt.Sprintf(format, args...)})
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	d.errorAt(d.pos(n), format, args...)
}

func (d *decoder) warnf(n *yaml.Node, format string, args ...any) {
	d.warnAt(d.pos(n), format, args...)
}

func (d *decoder) warnAt(p Pos, format string, args ...any) {
	d.warns = append(d.warns, Diagnostic{Pos: p, Message: fmt.Sprintf(format, args...), Warning: true})
}

// field checks a key the decoder knows against the table of fields (path
// is its table path) and records a refusal when this build does not
// honour it. what labels the key's owner in the message.
func (d *decoder) field(k *yaml.Node, what, path string) {
	f := LookupField(path)
	switch {
	case f == nil:
		d.refuse(k, fmt.Sprintf("%s: %s is not in the table of fields (refused at run)", what, path))
	case f.Support == Refused:
		d.refuse(k, fmt.Sprintf("%s: %s is not supported by this build: %s (refused at run)", what, path, f.Note))
	case f.Support == Hint:
		d.notes = append(d.notes, Diagnostic{Pos: d.pos(k), Message: fmt.Sprintf("%s: %s is a hint: %s", what, path, f.Note), Warning: true})
	}
}

// unknown records a key the parser does not know: kept out of the
// playbook's meaning, and refused at run.
func (d *decoder) unknown(k *yaml.Node, what, key string) {
	d.refuse(k, fmt.Sprintf("%s: unknown key %q (refused at run)", what, key))
}

func (d *decoder) refuse(n *yaml.Node, msg string) {
	diag := Diagnostic{Pos: d.pos(n), Message: msg, Warning: true}
	d.refusals = append(d.refusals, diag)
	d.warns = append(d.warns, diag)
}

// templated compiles a scalar written as a template ("{{ ... }}") for a
// field that otherwise holds a literal (a number, a duration); ok is false
// for anything else, which the caller decodes as a literal.
func (d *decoder) templated(n *yaml.Node, what string) (t *Template, ok bool) {
	n = d.resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || !IsTemplateSource(n.Value) {
		return nil, false
	}
	return d.template(n, what), true
}

// putTemplate stores t under key in *m, allocating the map.
func putTemplate(m *map[string]*Template, key string, t *Template) {
	if t == nil {
		return
	}
	if *m == nil {
		*m = make(map[string]*Template)
	}
	(*m)[key] = t
}

// addErr records err, keeping the position of a *Diagnostic (template
// syntax errors carry their own) and using n's position otherwise.
func (d *decoder) addErr(n *yaml.Node, prefix string, err error) {
	var diag *Diagnostic
	if errors.As(err, &diag) && diag.Pos.Line > 0 {
		msg := diag.Message
		if prefix != "" {
			msg = prefix + ": " + msg
		}
		p := diag.Pos
		if p.File == "" {
			p.File = d.file
		}
		d.errAtMsg(p, msg)
		return
	}
	if prefix != "" {
		d.errorf(n, "%s: %v", prefix, err)
		return
	}
	d.errorf(n, "%v", err)
}

func (d *decoder) errAtMsg(p Pos, msg string) {
	d.errs = append(d.errs, &Diagnostic{Pos: p, Message: msg})
}

// resolve follows aliases to the node they name.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			return nil
		}
		n = n.Alias
	}
	return n
}

// isNull reports whether n is absent or an explicit YAML null.
func (d *decoder) isNull(n *yaml.Node) bool {
	n = d.resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func kindName(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		}
		return "a scalar"
	case yaml.DocumentNode:
		return "a document"
	}
	return "an alias"
}

// mapping returns n's entries, or reports that what must be a mapping is
// something else. A null counts as an empty mapping. Merge keys (<<) are
// expanded; explicit keys win over merged ones. Duplicate keys are errors.
func (d *decoder) mapping(n *yaml.Node, what string) ([]pair, bool) {
	n = d.resolve(n)
	if d.isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s must be a mapping, got %s", what, kindName(n))
		return nil, false
	}
	var out []pair
	seen := make(map[string]*yaml.Node, len(n.Content)/2)
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.resolve(n.Content[i]), n.Content[i+1]
		if k == nil {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, "%s: a key must be a scalar, got %s", what, kindName(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			merged = append(merged, d.mergePairs(v, what, 0)...)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errorf(k, "%s: duplicate key %q (first at line %d)", what, k.Value, first.Line)
			continue
		}
		seen[k.Value] = k
		out = append(out, pair{key: k.Value, k: k, v: v})
	}
	for _, p := range merged {
		if _, ok := seen[p.key]; ok {
			continue
		}
		seen[p.key] = p.k
		out = append(out, p)
	}
	return out, true
}

// mergePairs returns the entries a merge key's value contributes: one
// mapping or a list of mappings.
func (d *decoder) mergePairs(v *yaml.Node, what string, depth int) []pair {
	v = d.resolve(v)
	if v == nil || depth > 8 {
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		if d.expanding[v] {
			d.errorf(v, "%s: merge key refers to its own mapping", what)
			return nil
		}
		d.budget -= len(v.Content)/2 + 1
		if !d.spend(v) {
			return nil
		}
		d.markExpanding(v, true)
		ps, _ := d.mapping(v, what)
		d.markExpanding(v, false)
		return ps
	case yaml.SequenceNode:
		var out []pair
		for _, item := range v.Content {
			out = append(out, d.mergePairs(item, what, depth+1)...)
		}
		return out
	}
	d.errorf(v, "%s: merge key needs a mapping, got %s", what, kindName(v))
	return nil
}

func (d *decoder) markExpanding(n *yaml.Node, on bool) {
	if d.expanding == nil {
		d.expanding = make(map[*yaml.Node]bool)
	}
	if on {
		d.expanding[n] = true
	} else {
		delete(d.expanding, n)
	}
}

// list returns n's items, or reports that what must be a list. A null
// counts as an empty list.
func (d *decoder) list(n *yaml.Node, what string) ([]*yaml.Node, bool) {
	n = d.resolve(n)
	if d.isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "%s must be a list, got %s", what, kindName(n))
		return nil, false
	}
	return n.Content, true
}

// str returns a scalar's text. Null is the empty string; numbers and
// booleans are returned as written.
func (d *decoder) str(n *yaml.Node, what string) (string, bool) {
	n = d.resolve(n)
	if d.isNull(n) {
		return "", true
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, "%s must be a string, got %s", what, kindName(n))
		return "", false
	}
	return n.Value, true
}

// number returns a numeric scalar (a quoted number is accepted too).
func (d *decoder) number(n *yaml.Node, what string) (float64, bool) {
	n = d.resolve(n)
	if d.isNull(n) {
		return 0, true
	}
	if n.Kind == yaml.ScalarNode {
		s := strings.TrimSpace(n.Value)
		if f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, true
		}
		if n.ShortTag() == "!!int" || n.ShortTag() == "!!float" {
			v, ok := d.scalar(n)
			switch x := v.(type) {
			case int64:
				return float64(x), ok
			case float64:
				if !math.IsNaN(x) && !math.IsInf(x, 0) {
					return x, ok
				}
			}
		}
	}
	d.errorf(n, "%s must be a number, got %s", what, kindName(n))
	return 0, false
}

// nonNegInt returns a literal, non-negative integer.
func (d *decoder) nonNegInt(n *yaml.Node, what string) (int64, bool) {
	f, ok := d.number(n, what)
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) || f >= math.MaxInt64 || f < math.MinInt64 {
		d.errorf(n, "%s must be an integer, got %s", what, d.resolve(n).Value)
		return 0, false
	}
	if f < 0 {
		d.errorf(n, "%s must not be negative, got %s", what, d.resolve(n).Value)
		return 0, false
	}
	return int64(f), true
}

// nonNegFloat returns a literal, non-negative number.
func (d *decoder) nonNegFloat(n *yaml.Node, what string) (float64, bool) {
	f, ok := d.number(n, what)
	if ok && f < 0 {
		d.errorf(n, "%s must not be negative, got %s", what, d.resolve(n).Value)
		return 0, false
	}
	return f, ok
}

// seconds decodes a duration written as a number of seconds or as a Go
// duration string ("30s", "1m30s").
func (d *decoder) seconds(n *yaml.Node, what string) (time.Duration, bool) {
	n = d.resolve(n)
	if d.isNull(n) {
		return 0, true
	}
	if n.Kind == yaml.ScalarNode {
		s := strings.TrimSpace(n.Value)
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			if f < 0 || math.IsNaN(f) {
				d.errorf(n, "%s must not be negative, got %s", what, s)
				return 0, false
			}
			if f > float64(math.MaxInt64)/float64(time.Second) {
				d.errorf(n, "%s is too large: %s", what, s)
				return 0, false
			}
			return time.Duration(f * float64(time.Second)), true
		}
		if dur, err := time.ParseDuration(s); err == nil {
			if dur < 0 {
				d.errorf(n, "%s must not be negative, got %s", what, s)
				return 0, false
			}
			return dur, true
		}
	}
	d.errorf(n, "%s must be a number of seconds or a duration such as \"30s\", got %s", what, describe(n))
	return 0, false
}

func describe(n *yaml.Node) string {
	if n != nil && n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return kindName(n)
}

// scalar converts a scalar node to a plain Go value: string, int64,
// float64, bool or nil.
func (d *decoder) scalar(n *yaml.Node) (any, bool) {
	switch n.ShortTag() {
	case "!!str":
		return n.Value, true
	case "!!null":
		return nil, true
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			d.errorf(n, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			return n.Value, false
		}
		switch x := v.(type) {
		case int:
			return int64(x), true
		case int64:
			return x, true
		case uint64:
			return float64(x), true
		case float64:
			return x, true
		case bool:
			return x, true
		}
		return n.Value, true
	}
	// Timestamps, binary and application tags keep their text.
	return n.Value, true
}

// spend charges one node reached through an alias against the expansion
// budget.
func (d *decoder) spend(n *yaml.Node) bool {
	if len(d.expanding) == 0 && n.Kind != yaml.AliasNode {
		return true
	}
	d.budget--
	if d.budget < 0 {
		if !d.overBudge {
			d.overBudge = true
			d.errorf(n, "aliases expand to more than %d nodes", maxAliasNodes)
		}
		return false
	}
	return true
}

// enterAlias returns the node to decode for n: n itself, or the target of
// the alias n, then marked as being expanded until the caller calls leave
// (never nil when ok). It guards against an alias that refers to its own
// ancestor.
func (d *decoder) enterAlias(n *yaml.Node) (t *yaml.Node, leave func(), ok bool) {
	if n.Kind != yaml.AliasNode {
		return n, noLeave, true
	}
	t = d.resolve(n)
	if t == nil {
		d.errorf(n, "unresolvable alias *%s", n.Value)
		return nil, nil, false
	}
	if d.expanding[t] {
		d.errorf(n, "alias *%s refers to a value that contains it", n.Value)
		return nil, nil, false
	}
	if t == n {
		return n, noLeave, true
	}
	d.markExpanding(t, true)
	return t, func() { d.markExpanding(t, false) }, true
}

func noLeave() {}

// plain converts n to plain Go values: map[string]any, []any, string,
// int64, float64, bool, nil.
func (d *decoder) plain(n *yaml.Node) any {
	if n == nil || !d.spend(n) {
		return nil
	}
	n, leave, ok := d.enterAlias(n)
	if !ok {
		return nil
	}
	defer leave()
	switch n.Kind {
	case yaml.ScalarNode:
		v, _ := d.scalar(n)
		return v
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, item := range n.Content {
			out = append(out, d.plain(item))
		}
		return out
	case yaml.MappingNode:
		ps, _ := d.mapping(n, "mapping")
		out := make(map[string]any, len(ps))
		for _, p := range ps {
			out[p.key] = d.plain(p.v)
		}
		return out
	}
	return nil
}

// plainMap converts a mapping to plain values; what names it in errors.
func (d *decoder) plainMap(n *yaml.Node, what string) map[string]any {
	ps, ok := d.mapping(n, what)
	if !ok {
		return nil
	}
	out := make(map[string]any, len(ps))
	for _, p := range ps {
		out[p.key] = d.plain(p.v)
	}
	return out
}

// sourceLine returns line l (1-based) of the source, or "".
func (d *decoder) sourceLine(l int) string {
	if d.lines == nil {
		d.lines = strings.Split(string(d.src), "\n")
	}
	if l < 1 || l > len(d.lines) {
		return ""
	}
	return strings.TrimSuffix(d.lines[l-1], "\r")
}

// textPos is where a scalar's text begins: after the opening quote of a
// quoted scalar, and at the first content line of a block scalar (| or >),
// so template errors point into the template itself.
func (d *decoder) textPos(n *yaml.Node) Pos {
	p := d.pos(n)
	switch n.Style {
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		p.Col++
	case yaml.LiteralStyle, yaml.FoldedStyle:
		for l := n.Line + 1; l <= n.Line+1000; l++ {
			line := d.sourceLine(l)
			if strings.TrimSpace(line) == "" {
				if d.lines != nil && l >= len(d.lines) {
					break
				}
				continue
			}
			p.Line = l
			p.Col = len(line) - len(strings.TrimLeft(line, " ")) + 1
			break
		}
	}
	return p
}

// value compiles n into a Value with templates at its string leaves.
func (d *decoder) value(n *yaml.Node) *Value {
	return d.valueOf(n, "")
}

// valueOf is value for the field what (such as "step load: tool.command"):
// a template that does not compile is reported with what and the path
// below it, so the message names the step and field. An empty what adds
// nothing.
func (d *decoder) valueOf(n *yaml.Node, what string) *Value {
	if n == nil {
		return NewLiteralValue(nil, Pos{File: d.file})
	}
	if !d.spend(n) {
		return NewLiteralValue(nil, d.pos(n))
	}
	t, leave, ok := d.enterAlias(n)
	if !ok {
		return NewLiteralValue(nil, d.pos(n))
	}
	defer leave()
	n = t
	switch n.Kind {
	case yaml.ScalarNode:
		v, _ := d.scalar(n)
		if s, isStr := v.(string); isStr {
			t, err := d.compile(n, s)
			if err != nil {
				d.addErr(n, what, err)
				return NewLiteralValue(s, d.pos(n))
			}
			return scalarValue(s, d.textPos(n), t)
		}
		return NewLiteralValue(v, d.pos(n))
	case yaml.SequenceNode:
		items := make([]*Value, 0, len(n.Content))
		for i, item := range n.Content {
			items = append(items, d.valueOf(item, subField(what, fmt.Sprintf("[%d]", i))))
		}
		return NewListValue(items, d.pos(n))
	case yaml.MappingNode:
		ps, _ := d.mapping(n, "mapping")
		keys := make([]string, 0, len(ps))
		vals := make([]*Value, 0, len(ps))
		for _, p := range ps {
			keys = append(keys, p.key)
			vals = append(vals, d.valueOf(p.v, subField(what, "."+p.key)))
		}
		return NewMapValue(keys, vals, d.pos(n))
	}
	return NewLiteralValue(nil, d.pos(n))
}

// valueMap compiles each entry of a mapping.
func (d *decoder) valueMap(n *yaml.Node, what string) map[string]*Value {
	ps, ok := d.mapping(n, what)
	if !ok || len(ps) == 0 {
		return nil
	}
	out := make(map[string]*Value, len(ps))
	for _, p := range ps {
		out[p.key] = d.valueOf(p.v, what+"."+p.key)
	}
	return out
}

// subField names the part sub (".key" or "[i]") of the field what; ""
// when what is.
func subField(what, sub string) string {
	if what == "" {
		return ""
	}
	return what + sub
}

// template compiles a scalar as a template; nil for null.
func (d *decoder) template(n *yaml.Node, what string) *Template {
	n = d.resolve(n)
	if d.isNull(n) {
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, "%s must be a template string, got %s", what, kindName(n))
		return nil
	}
	t, err := d.compile(n, n.Value)
	if err != nil {
		d.addErr(n, what, err)
		return nil
	}
	return t
}

// assignments decodes a set block: dotted path -> value, in source order.
func (d *decoder) assignments(n *yaml.Node, what string) []*Assignment {
	ps, ok := d.mapping(n, what)
	if !ok {
		return nil
	}
	out := make([]*Assignment, 0, len(ps))
	for _, p := range ps {
		path := strings.TrimSpace(p.key)
		if path == "" || strings.HasPrefix(path, ".") || strings.HasSuffix(path, ".") || strings.Contains(path, "..") {
			d.errorf(p.k, "%s: bad assignment path %q", what, p.key)
			continue
		}
		out = append(out, &Assignment{Path: path, Value: d.valueOf(p.v, what+"."+path), Pos: d.pos(p.k)})
	}
	return out
}
