package dsl

import (
	"errors"
	"fmt"
	"math"
	"slices"
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

	errs  ErrorList
	warns []Diagnostic

	toolKeyed map[*Step]bool // steps that have a tool: key, even a broken one

	budget    int                 // nodes the value converters may still visit
	overBudge bool                // the budget error was reported
	expanding map[*yaml.Node]bool // aliases being expanded (cycle detection)
}

func newDecoder(file string, src []byte) *decoder {
	return &decoder{file: file, src: src, budget: maxAliasNodes}
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
	d.warns = append(d.warns, Diagnostic{Pos: d.pos(n), Message: fmt.Sprintf(format, args...), Warning: true})
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
			val, err := NewScalarValue(s, d.textPos(n))
			if err != nil {
				d.addErr(n, "", err)
				return NewLiteralValue(s, d.pos(n))
			}
			return val
		}
		return NewLiteralValue(v, d.pos(n))
	case yaml.SequenceNode:
		items := make([]*Value, 0, len(n.Content))
		for _, item := range n.Content {
			items = append(items, d.value(item))
		}
		return NewListValue(items, d.pos(n))
	case yaml.MappingNode:
		ps, _ := d.mapping(n, "mapping")
		keys := make([]string, 0, len(ps))
		vals := make([]*Value, 0, len(ps))
		for _, p := range ps {
			keys = append(keys, p.key)
			vals = append(vals, d.value(p.v))
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
		out[p.key] = d.value(p.v)
	}
	return out
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
	t, err := CompileTemplate(n.Value, d.textPos(n))
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
		out = append(out, &Assignment{Path: path, Value: d.value(p.v), Pos: d.pos(p.k)})
	}
	return out
}

// ---------------------------------------------------------------------------
// Playbook

func (d *decoder) playbook(root *yaml.Node) *Playbook {
	pb := &Playbook{File: d.file, Pos: d.pos(root)}
	ps, ok := d.mapping(root, "playbook")
	if !ok {
		return pb
	}
	var workflow *yaml.Node
	for _, p := range ps {
		switch p.key {
		case "apiVersion":
			pb.APIVersion, _ = d.str(p.v, "apiVersion")
			if pb.APIVersion != "" && !strings.HasPrefix(pb.APIVersion, "noetl.io/") {
				d.warnf(p.v, "unexpected apiVersion %q (want noetl.io/v2)", pb.APIVersion)
			}
		case "kind":
			pb.Kind, _ = d.str(p.v, "kind")
			if pb.Kind != "" && !strings.EqualFold(pb.Kind, "Playbook") {
				d.warnf(p.v, "unexpected kind %q (want Playbook)", pb.Kind)
			}
		case "metadata":
			d.metadata(pb, p.v)
		case "workload":
			pb.Workload = d.plainMap(p.v, "workload")
		case "vars":
			pb.Vars = d.valueMap(p.v, "vars")
		case "keychain":
			d.keychain(pb, p.v)
		case "workbook":
			d.workbook(pb, p.v)
		case "workflow":
			workflow = p.v
			items, ok := d.list(p.v, "workflow")
			if !ok {
				continue
			}
			for _, item := range items {
				if s := d.step(item); s != nil {
					pb.Workflow = append(pb.Workflow, s)
				}
			}
		default:
			d.warnf(p.k, "unknown top-level key %q (ignored)", p.key)
		}
	}
	if workflow == nil {
		d.errorf(root, "workflow is required")
	} else if len(pb.Workflow) == 0 {
		if w := d.resolve(workflow); w != nil && (d.isNull(w) || (w.Kind == yaml.SequenceNode && len(w.Content) == 0)) {
			d.errorf(w, "workflow is empty")
		}
	}
	return pb
}

func (d *decoder) metadata(pb *Playbook, n *yaml.Node) {
	ps, _ := d.mapping(n, "metadata")
	for _, p := range ps {
		switch p.key {
		case "name":
			pb.Metadata.Name, _ = d.str(p.v, "metadata.name")
		case "path":
			pb.Metadata.Path, _ = d.str(p.v, "metadata.path")
		case "description":
			pb.Metadata.Description, _ = d.str(p.v, "metadata.description")
		default:
			if pb.Metadata.Extra == nil {
				pb.Metadata.Extra = make(map[string]any)
			}
			pb.Metadata.Extra[p.key] = d.plain(p.v)
		}
	}
}

func (d *decoder) keychain(pb *Playbook, n *yaml.Node) {
	items, _ := d.list(n, "keychain")
	for i, item := range items {
		what := fmt.Sprintf("keychain[%d]", i)
		ps, ok := d.mapping(item, what)
		if !ok {
			continue
		}
		e := &KeychainEntry{Pos: d.pos(d.resolve(item))}
		for _, p := range ps {
			switch p.key {
			case "name":
				e.Name, _ = d.str(p.v, what+".name")
			case "kind":
				e.Kind, _ = d.str(p.v, what+".kind")
			default:
				if e.Fields == nil {
					e.Fields = make(map[string]any)
				}
				e.Fields[p.key] = d.plain(p.v)
			}
		}
		if e.Name == "" {
			d.errorAt(e.Pos, "%s: name is required", what)
		}
		pb.Keychain = append(pb.Keychain, e)
	}
}

func (d *decoder) workbook(pb *Playbook, n *yaml.Node) {
	items, _ := d.list(n, "workbook")
	for i, item := range items {
		t := d.task(item, fmt.Sprintf("workbook[%d]", i), "", true)
		if t != nil {
			pb.Workbook = append(pb.Workbook, t)
		}
	}
}

// ---------------------------------------------------------------------------
// Steps

func (d *decoder) step(n *yaml.Node) *Step {
	n = d.resolve(n)
	if d.isNull(n) {
		d.errorf(n, "workflow step is empty")
		return nil
	}
	ps, ok := d.mapping(n, "workflow step")
	if !ok || n == nil {
		return nil
	}
	s := &Step{Pos: d.pos(n)}
	// The name comes first so that every other message can use it.
	for _, p := range ps {
		if p.key == "step" {
			s.Name, _ = d.str(p.v, "step name")
		}
	}
	what := stepLabel(s)
	if s.Name == "" {
		d.errorf(n, "workflow step: step (its name) is required")
	}
	var argsSetBy map[string]string // arg name -> the key that set it
	var toolNode *yaml.Node
	for _, p := range ps {
		switch p.key {
		case "step":
		case "desc", "description":
			s.Desc, _ = d.str(p.v, what+": desc")
		case "when":
			s.When = d.template(p.v, what+": when")
		case "args", "input":
			d.args(&s.Args, &argsSetBy, p, what+": "+p.key, func(ap pair, prev string) {
				d.errorf(ap.k, "%s: argument %q is set in both %s and %s", what, ap.key, prev, p.key)
			})
		case "vars":
			s.Vars = d.valueMap(p.v, what+": vars")
		case "set":
			s.Set = d.assignments(p.v, what+": set")
		case "loop":
			s.Loop = d.loop(p.v, what)
		case "tool":
			toolNode = p.v
			d.tool(s, p.v, what)
			if !d.isNull(p.v) {
				if d.toolKeyed == nil {
					d.toolKeyed = make(map[*Step]bool)
				}
				d.toolKeyed[s] = true
			}
		case "next":
			s.Next = d.next(p.v, what)
		case "spec":
			d.stepSpec(s, p.v, what)
		case "kind":
			k, _ := d.str(p.v, what+": kind")
			if k != "workbook" {
				d.errorf(p.v, "%s: kind must be workbook (a tool goes under tool:), got %q", what, k)
				continue
			}
			s.Kind = k
		case "name", "task":
			s.TaskName, _ = d.str(p.v, what+": "+p.key)
		default:
			if s.Extra == nil {
				s.Extra = make(map[string]*Value)
			}
			s.Extra[p.key] = d.value(p.v)
			d.warnf(p.k, "%s: unknown key %q (ignored)", what, p.key)
		}
	}
	if s.Kind == "workbook" {
		if toolNode != nil {
			d.errorf(toolNode, "%s: a kind: workbook step cannot also have a tool", what)
		}
		if s.TaskName == "" {
			d.errorf(n, "%s: kind: workbook needs name: (the workbook task to run)", what)
		}
	} else if s.TaskName != "" {
		d.warnf(n, "%s: name/task %q is only used by kind: workbook steps", what, s.TaskName)
	}
	if s.Spec.LoopMode == ModeFanout {
		// NoETL's fan-out profile names it on the step.
		switch {
		case s.Loop == nil:
			d.warnf(n, "%s: spec.loop_mode fanout without a loop (ignored)", what)
		case s.Loop.Cursor != nil:
			d.errorf(n, "%s: spec.loop_mode fanout needs loop.in (a collection), not a cursor", what)
		default:
			s.Loop.Mode = ModeFanout
		}
	}
	return s
}

// args decodes p, an args or input mapping labelled label, into *args.
// *setBy records the key (args or input) that set each argument; an
// argument set again is passed to dup, with the key that set it first,
// and skipped.
func (d *decoder) args(args *map[string]*Value, setBy *map[string]string, p pair, label string, dup func(ap pair, prev string)) {
	aps, _ := d.mapping(p.v, label)
	if len(aps) > 0 && *args == nil {
		*args = make(map[string]*Value, len(aps))
		*setBy = make(map[string]string, len(aps))
	}
	for _, ap := range aps {
		if prev, ok := (*setBy)[ap.key]; ok {
			dup(ap, prev)
			continue
		}
		(*setBy)[ap.key] = p.key
		(*args)[ap.key] = d.value(ap.v)
	}
}

// stepLabel names a step in messages.
func stepLabel(s *Step) string {
	if s.Name == "" {
		return fmt.Sprintf("step at line %d", s.Pos.Line)
	}
	return "step " + s.Name
}

func (d *decoder) stepSpec(s *Step, n *yaml.Node, what string) {
	ps, _ := d.mapping(n, what+": spec")
	for _, p := range ps {
		switch p.key {
		case "timeout":
			s.Spec.Timeout, _ = d.seconds(p.v, what+": spec.timeout")
		case "on_error":
			s.Spec.OnError, _ = d.str(p.v, what+": spec.on_error")
		case "pool":
			s.Spec.Pool, _ = d.str(p.v, what+": spec.pool")
		case "worker_labels":
			s.Spec.WorkerLabels = d.labels(p.v, what+": spec.worker_labels")
		case "loop_mode":
			s.Spec.LoopMode, _ = d.str(p.v, what+": spec.loop_mode")
			switch s.Spec.LoopMode {
			case "", "local", ModeFanout:
			default:
				d.errorf(p.v, "%s: bad spec.loop_mode %q (want fanout or local)", what, s.Spec.LoopMode)
			}
		case "policy":
			var admit any
			s.Spec.Policy, admit = d.policy(p.v, what+": spec.policy")
			if admit != nil {
				d.setSpecExtra(s, "policy.admit", admit)
			}
		default:
			d.setSpecExtra(s, p.key, d.plain(p.v))
			d.warnf(p.k, "%s: unknown spec key %q (kept, not enforced)", what, p.key)
		}
	}
}

// boolean decodes a YAML boolean.
func (d *decoder) boolean(n *yaml.Node, what string) bool {
	n = d.resolve(n)
	if d.isNull(n) {
		return false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		d.errorf(n, "%s must be true or false, got %s", what, kindName(n))
		return false
	}
	return n.Value == "true" || n.Value == "True" || n.Value == "TRUE"
}

// labels decodes a mapping of label names to scalar values (written as
// strings: zone: eu, gpus: 2 → "2").
func (d *decoder) labels(n *yaml.Node, what string) map[string]string {
	pairs, ok := d.mapping(n, what)
	if !ok || len(pairs) == 0 {
		return nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		v := d.resolve(p.v)
		if v.Kind != yaml.ScalarNode || d.isNull(v) {
			d.errorf(v, "%s.%s must be a string, got %s", what, p.key, kindName(v))
			continue
		}
		out[p.key] = v.Value
	}
	return out
}

func (d *decoder) setSpecExtra(s *Step, key string, v any) {
	if s.Spec.Extra == nil {
		s.Spec.Extra = make(map[string]any)
	}
	s.Spec.Extra[key] = v
}

// tool decodes a step's tool: one task mapping or a pipeline list.
func (d *decoder) tool(s *Step, n *yaml.Node, what string) {
	n = d.resolve(n)
	if d.isNull(n) {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		if t := d.task(n, what+": tool", what+": ", false); t != nil {
			s.Tool = []*Task{t}
		}
	case yaml.SequenceNode:
		s.Pipeline = true
		seen := make(map[string]bool)
		for i, item := range n.Content {
			item = d.resolve(item)
			// NoETL's older shorthand: `- task_name: {kind: ..., ...}`.
			named := ""
			if item != nil && item.Kind == yaml.MappingNode && len(item.Content) == 2 {
				k, v := d.resolve(item.Content[0]), d.resolve(item.Content[1])
				if k != nil && v != nil && k.Kind == yaml.ScalarNode && k.Value != "name" && k.Value != "kind" && v.Kind == yaml.MappingNode {
					named, item = k.Value, v
				}
			}
			t := d.task(item, fmt.Sprintf("%s: tool[%d]", what, i), what+": ", named == "")
			if t == nil {
				continue
			}
			if named != "" && t.Name == "" {
				t.Name = named
			}
			if t.Name != "" {
				if seen[t.Name] {
					d.errorAt(t.Pos, "%s: duplicate pipeline task name %q", what, t.Name)
				}
				seen[t.Name] = true
			}
			s.Tool = append(s.Tool, t)
		}
		if len(n.Content) == 0 {
			d.errorf(n, "%s: tool pipeline is empty", what)
		}
	default:
		d.errorf(n, "%s: tool must be a mapping or a list of tasks, got %s", what, kindName(n))
	}
}

// task decodes a tool invocation. what labels it in messages until its
// name is known; prefix is prepended to "task NAME" once it is. named says
// the task needs a name (pipeline entries and workbook tasks).
func (d *decoder) task(n *yaml.Node, what, prefix string, named bool) *Task {
	n = d.resolve(n)
	ps, ok := d.mapping(n, what)
	if !ok || n == nil {
		return nil
	}
	t := &Task{Pos: d.pos(n)}
	for _, p := range ps {
		if p.key == "name" {
			t.Name, _ = d.str(p.v, what+".name")
		}
	}
	if t.Name != "" {
		what = prefix + "task " + t.Name
	}
	for _, p := range ps {
		switch p.key {
		case "name":
		case "kind":
			t.Kind, _ = d.str(p.v, what+": kind")
		case "spec":
			sps, _ := d.mapping(p.v, what+": spec")
			for _, sp := range sps {
				switch sp.key {
				case "policy":
					t.Policy, _ = d.policy(sp.v, what+": spec.policy")
				case "timeout":
					t.Timeout, _ = d.seconds(sp.v, what+": spec.timeout")
				default:
					d.warnf(sp.k, "%s: unknown spec key %q (ignored)", what, sp.key)
				}
			}
		case "set":
			t.Set = d.assignments(p.v, what+": set")
		default:
			if t.Config == nil {
				t.Config = make(map[string]*Value)
			}
			t.Config[p.key] = d.value(p.v)
		}
	}
	if named && t.Name == "" {
		d.errorAt(t.Pos, "%s: name is required", what)
	}
	if t.Kind == "" {
		d.errorAt(t.Pos, "%s: kind is required", what)
	}
	return t
}

// ---------------------------------------------------------------------------
// Loops

func (d *decoder) loop(n *yaml.Node, what string) *Loop {
	n = d.resolve(n)
	if d.isNull(n) {
		d.errorf(n, "%s: loop is empty", what)
		return nil
	}
	ps, ok := d.mapping(n, what+": loop")
	if !ok {
		return nil
	}
	l := &Loop{Pos: d.pos(n)}
	var modeNode, frameNode, loopModeNode, fanoutNode *yaml.Node
	var loopMode string
	specKeys := func(p pair, prefix string) bool {
		switch p.key {
		case "mode":
			l.Mode, _ = d.str(p.v, what+": "+prefix+"mode")
			modeNode = p.v
		case "loop_mode":
			loopMode, _ = d.str(p.v, what+": "+prefix+"loop_mode")
			loopModeNode = p.v
		case "shards", "shard_size", "max_shard_retries":
			v, _ := d.nonNegInt(p.v, what+": "+prefix+p.key)
			n := int(min(v, math.MaxInt32))
			switch p.key {
			case "shards":
				l.Fanout.Shards = n
			case "shard_size":
				l.Fanout.ShardSize = n
			default:
				l.Fanout.MaxShardRetries = n
			}
			fanoutNode = p.v
		case "allow_partial":
			l.Fanout.AllowPartial = d.boolean(p.v, what+": "+prefix+"allow_partial")
			fanoutNode = p.v
		case "max_in_flight":
			v, _ := d.nonNegInt(p.v, what+": "+prefix+"max_in_flight")
			l.MaxInFlight = int(min(v, math.MaxInt32))
		case "frame":
			frameNode = p.v
			d.frame(&l.Frame, p.v, what+": "+prefix+"frame")
		case "policy":
			l.Policy, _ = d.policy(p.v, what+": "+prefix+"policy")
		default:
			return false
		}
		return true
	}
	for _, p := range ps {
		switch p.key {
		case "in":
			if d.isNull(p.v) {
				d.errorf(p.v, "%s: loop.in is empty", what)
				continue
			}
			l.In = d.value(p.v)
		case "iterator":
			l.Iterator, _ = d.str(p.v, what+": loop.iterator")
		case "cursor":
			l.Cursor = d.cursor(p.v, what)
		case "spec":
			sps, _ := d.mapping(p.v, what+": loop.spec")
			for _, sp := range sps {
				if !specKeys(sp, "loop.spec.") {
					d.warnf(sp.k, "%s: unknown loop.spec key %q (ignored)", what, sp.key)
				}
			}
		default:
			// NoETL v1 wrote the spec keys directly under loop.
			if !specKeys(p, "loop.") {
				d.warnf(p.k, "%s: unknown loop key %q (ignored)", what, p.key)
			}
		}
	}
	switch {
	case l.In == nil && l.Cursor == nil:
		d.errorf(n, "%s: loop needs in (a collection) or cursor", what)
	case l.In != nil && l.Cursor != nil:
		d.errorf(n, "%s: loop cannot have both in and cursor", what)
	}
	if l.Iterator == "" {
		d.errorf(n, "%s: loop.iterator is required", what)
	}
	switch loopMode {
	case "", "local":
		if fanoutNode != nil {
			d.warnf(fanoutNode, "%s: shards, shard_size, max_shard_retries and allow_partial only apply to loop_mode fanout (ignored)", what)
		}
	case ModeFanout:
		switch {
		case l.Cursor != nil:
			d.errorf(loopModeNode, "%s: loop_mode fanout needs loop.in (a collection), not a cursor", what)
		case l.Fanout.Shards > 0 && l.Fanout.ShardSize > 0:
			d.errorf(loopModeNode, "%s: give loop_mode fanout shards or shard_size, not both", what)
		}
		l.Mode = ModeFanout
	default:
		d.errorf(loopModeNode, "%s: bad loop_mode %q (want fanout or local)", what, loopMode)
	}
	switch l.Mode {
	case "":
		if l.Cursor != nil {
			l.Mode = ModeCursor
		} else {
			l.Mode = ModeSequential
		}
	case ModeSequential, ModeParallel:
		if l.Cursor != nil {
			d.errorf(modeNode, "%s: a cursor loop's mode must be cursor, got %q", what, l.Mode)
		}
	case ModeCursor:
		if l.Cursor == nil && l.In != nil {
			d.errorf(modeNode, "%s: mode cursor needs loop.cursor", what)
		}
	case ModeFanout:
		if loopMode == "" {
			d.errorf(modeNode, "%s: fan-out is loop.spec.loop_mode: fanout (mode stays sequential or parallel)", what)
		}
	default:
		d.errorf(modeNode, "%s: bad loop mode %q (want sequential, parallel or cursor)", what, l.Mode)
	}
	if frameNode != nil && l.Cursor == nil && l.In != nil {
		d.warnf(frameNode, "%s: frame only applies to cursor loops (ignored)", what)
	}
	fillFrameDefaults(&l.Frame)
	if f := l.Frame; f.HeartbeatSeconds >= f.LeaseSeconds {
		at := frameNode
		if at == nil {
			at = n
		}
		d.errorf(at, "%s: frame heartbeat_seconds (%g) must be less than lease_seconds (%g)", what, f.HeartbeatSeconds, f.LeaseSeconds)
	}
	return l
}

// sqlCursorKinds are the cursor kinds whose claim is a SQL statement the
// playbook must supply.
var sqlCursorKinds = []string{"postgres", "mysql", "sqlite", "clickhouse"}

func (d *decoder) cursor(n *yaml.Node, what string) *CursorSpec {
	n = d.resolve(n)
	ps, ok := d.mapping(n, what+": loop.cursor")
	if !ok || n == nil {
		return nil
	}
	c := &CursorSpec{Pos: d.pos(n)}
	var authKey string
	for _, p := range ps {
		switch p.key {
		case "kind":
			c.Kind, _ = d.str(p.v, what+": cursor.kind")
		case "auth", "credential":
			if authKey != "" {
				d.errorf(p.k, "%s: cursor has both %s and %s", what, authKey, p.key)
				continue
			}
			authKey = p.key
			c.Auth = d.value(p.v)
		case "claim":
			c.Claim = d.template(p.v, what+": cursor.claim")
		default:
			if c.Options == nil {
				c.Options = make(map[string]*Value)
			}
			c.Options[p.key] = d.value(p.v)
		}
	}
	if c.Kind == "" {
		d.errorf(n, "%s: cursor.kind is required", what)
	} else if c.Claim == nil && slices.Contains(sqlCursorKinds, c.Kind) && !hasKey(ps, "claim") {
		d.errorf(n, "%s: a %s cursor needs claim (the SQL that leases rows)", what, c.Kind)
	}
	return c
}

func hasKey(ps []pair, key string) bool {
	for _, p := range ps {
		if p.key == key {
			return true
		}
	}
	return false
}

func (d *decoder) frame(f *FrameSpec, n *yaml.Node, what string) {
	ps, _ := d.mapping(n, what)
	for _, p := range ps {
		w := what + "." + p.key
		switch p.key {
		case "max_rows":
			v, _ := d.nonNegInt(p.v, w)
			f.MaxRows = int(min(v, math.MaxInt32))
		case "row_concurrency":
			v, _ := d.nonNegInt(p.v, w)
			f.RowConcurrency = int(min(v, math.MaxInt32))
		case "lease_seconds":
			f.LeaseSeconds, _ = d.nonNegFloat(p.v, w)
		case "heartbeat_seconds":
			f.HeartbeatSeconds, _ = d.nonNegFloat(p.v, w)
		case "max_seconds":
			f.MaxSeconds, _ = d.nonNegFloat(p.v, w)
		case "max_bytes":
			f.MaxBytes, _ = d.nonNegInt(p.v, w)
		case "max_attempts":
			v, _ := d.nonNegInt(p.v, w)
			f.MaxAttempts = int(min(v, math.MaxInt32))
		case "process":
			f.Process, _ = d.str(p.v, w)
			if f.Process != "" && f.Process != ProcessRow && f.Process != ProcessFrame {
				d.errorf(p.v, "%s: bad process %q (want row or frame)", what, f.Process)
			}
		default:
			d.warnf(p.k, "%s: unknown key %q (ignored)", what, p.key)
		}
	}
}

// Frame defaults, applied to every loop.
const (
	DefaultFrameMaxRows        = 1
	DefaultFrameRowConcurrency = 1
	DefaultFrameLeaseSeconds   = 60
	DefaultFrameMaxAttempts    = 3
	DefaultRetryAttempts       = 3
)

func fillFrameDefaults(f *FrameSpec) {
	if f.MaxRows == 0 {
		f.MaxRows = DefaultFrameMaxRows
	}
	if f.RowConcurrency == 0 {
		f.RowConcurrency = DefaultFrameRowConcurrency
	}
	if f.LeaseSeconds == 0 {
		f.LeaseSeconds = DefaultFrameLeaseSeconds
	}
	if f.HeartbeatSeconds == 0 {
		f.HeartbeatSeconds = f.LeaseSeconds / 3
	}
	if f.Process == "" {
		f.Process = ProcessRow
	}
	if f.MaxAttempts == 0 {
		f.MaxAttempts = DefaultFrameMaxAttempts
	}
}

// ---------------------------------------------------------------------------
// Routing

func (d *decoder) next(n *yaml.Node, what string) *Next {
	n = d.resolve(n)
	if d.isNull(n) {
		return nil
	}
	nx := &Next{Mode: NextExclusive, Pos: d.pos(n)}
	switch n.Kind {
	case yaml.ScalarNode:
		nx.Arcs = []*Arc{{Step: n.Value, Pos: d.pos(n)}}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			if a := d.arc(item, what); a != nil {
				nx.Arcs = append(nx.Arcs, a)
			}
		}
	case yaml.MappingNode:
		ps, _ := d.mapping(n, what+": next")
		if hasKey(ps, "step") && !hasKey(ps, "arcs") {
			// A single arc written as a mapping.
			if a := d.arc(n, what); a != nil {
				nx.Arcs = append(nx.Arcs, a)
			}
			return nx
		}
		for _, p := range ps {
			switch p.key {
			case "spec":
				sps, _ := d.mapping(p.v, what+": next.spec")
				for _, sp := range sps {
					switch sp.key {
					case "mode":
						m, _ := d.str(sp.v, what+": next.spec.mode")
						switch m {
						case "":
						case NextExclusive, NextInclusive:
							nx.Mode = m
						default:
							d.errorf(sp.v, "%s: bad next mode %q (want exclusive or inclusive)", what, m)
						}
					case "on_no_match":
						nx.OnNoMatch, _ = d.str(sp.v, what+": next.spec.on_no_match")
					default:
						d.warnf(sp.k, "%s: unknown next.spec key %q (ignored)", what, sp.key)
					}
				}
			case "arcs":
				items, _ := d.list(p.v, what+": next.arcs")
				for _, item := range items {
					if a := d.arc(item, what); a != nil {
						nx.Arcs = append(nx.Arcs, a)
					}
				}
			case "mode":
				// NoETL v1 put the mode directly under next.
				m, _ := d.str(p.v, what+": next.mode")
				if m == NextExclusive || m == NextInclusive {
					nx.Mode = m
				} else if m != "" {
					d.errorf(p.v, "%s: bad next mode %q (want exclusive or inclusive)", what, m)
				}
			default:
				d.warnf(p.k, "%s: unknown next key %q (ignored)", what, p.key)
			}
		}
	default:
		d.errorf(n, "%s: next must be a step name, a list or a mapping, got %s", what, kindName(n))
		return nil
	}
	return nx
}

func (d *decoder) arc(n *yaml.Node, what string) *Arc {
	n = d.resolve(n)
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		name, _ := d.str(n, what+": next")
		if name == "" {
			d.errorf(n, "%s: empty next target", what)
			return nil
		}
		return &Arc{Step: name, Pos: d.pos(n)}
	}
	ps, ok := d.mapping(n, what+": next arc")
	if !ok {
		return nil
	}
	a := &Arc{Pos: d.pos(n)}
	var argsSetBy map[string]string
	for _, p := range ps {
		switch p.key {
		case "step":
			a.Step, _ = d.str(p.v, what+": arc step")
			a.Pos = d.pos(d.resolve(p.v))
		case "when":
			a.When = d.template(p.v, what+": arc when")
		case "set":
			a.Set = d.assignments(p.v, what+": arc set")
		case "args", "input":
			d.args(&a.Args, &argsSetBy, p, what+": arc "+p.key, func(ap pair, _ string) {
				d.errorf(ap.k, "%s: arc argument %q is set twice", what, ap.key)
			})
		default:
			d.warnf(p.k, "%s: unknown arc key %q (ignored)", what, p.key)
		}
	}
	if a.Step == "" {
		d.errorf(n, "%s: next arc needs step", what)
		return nil
	}
	return a
}

// ---------------------------------------------------------------------------
// Policies

// policy decodes a spec.policy block. It returns the rules (nil when there
// are none) and, separately, NoETL's admit block as plain values, which is
// kept but not enforced.
func (d *decoder) policy(n *yaml.Node, what string) (*Policy, any) {
	n = d.resolve(n)
	if d.isNull(n) {
		return nil, nil
	}
	var rulesNode *yaml.Node
	var admit any
	switch n.Kind {
	case yaml.SequenceNode:
		rulesNode = n
	case yaml.MappingNode:
		ps, _ := d.mapping(n, what)
		for _, p := range ps {
			switch p.key {
			case "rules":
				rulesNode = p.v
			case "admit":
				admit = d.plain(p.v)
				d.warnf(p.k, "%s: admit rules are not enforced (kept as spec extra)", what)
			default:
				d.warnf(p.k, "%s: unknown policy key %q (ignored)", what, p.key)
			}
		}
	default:
		d.errorf(n, "%s must be a mapping with rules, got %s", what, kindName(n))
		return nil, nil
	}
	if rulesNode == nil {
		return nil, admit
	}
	items, ok := d.list(rulesNode, what+".rules")
	if !ok {
		return nil, admit
	}
	pol := &Policy{Pos: d.pos(n)}
	sawElse := false
	for i, item := range items {
		r := d.rule(item, fmt.Sprintf("%s.rules[%d]", what, i))
		if r == nil {
			continue
		}
		if sawElse {
			d.warnf(d.resolve(item), "%s.rules[%d] follows an else rule and never matches", what, i)
		}
		sawElse = sawElse || r.Else
		pol.Rules = append(pol.Rules, r)
	}
	return pol, admit
}

func (d *decoder) rule(n *yaml.Node, what string) *Rule {
	n = d.resolve(n)
	ps, ok := d.mapping(n, what)
	if !ok || n == nil {
		return nil
	}
	r := &Rule{Pos: d.pos(n)}
	var whenNode, elseNode, thenNode *yaml.Node
	for _, p := range ps {
		switch p.key {
		case "when":
			whenNode = p.v
		case "else":
			elseNode = p.v
		case "then":
			thenNode = p.v
		default:
			d.warnf(p.k, "%s: unknown rule key %q (ignored)", what, p.key)
		}
	}
	switch {
	case whenNode != nil && elseNode != nil:
		d.errorf(n, "%s: a rule has when or else, not both", what)
		return nil
	case elseNode != nil:
		r.Else = true
		e := d.resolve(elseNode)
		if e != nil && e.Kind == yaml.MappingNode {
			eps, _ := d.mapping(e, what+".else")
			switch {
			case hasKey(eps, "then"):
				for _, ep := range eps {
					if ep.key == "then" {
						if thenNode != nil {
							d.errorf(thenNode, "%s: else rule has two then blocks", what)
						}
						thenNode = ep.v
					} else {
						d.warnf(ep.k, "%s.else: unknown key %q (ignored)", what, ep.key)
					}
				}
			case thenNode == nil:
				// `else: {do: continue}`: the action written directly.
				thenNode = e
			}
		} else if !d.isNull(e) && (e.Kind != yaml.ScalarNode || e.ShortTag() != "!!bool") {
			d.errorf(e, "%s: else must hold then:, got %s", what, kindName(e))
		}
		// Otherwise `- else:` with a sibling `then:` — a common
		// indentation slip in real playbooks, accepted as written.
	case whenNode != nil:
		r.When = d.template(whenNode, what+".when")
	default:
		d.errorf(n, "%s: a rule needs when or else", what)
		return nil
	}
	if thenNode == nil {
		d.errorf(n, "%s: then is required", what)
		return nil
	}
	r.Then = d.action(thenNode, what+".then")
	return r
}

var (
	policyActions = []string{DoContinue, DoRetry, DoBreak, DoJump, DoFail}
	backoffKinds  = []string{BackoffNone, BackoffFixed, BackoffLinear, BackoffExponential}
)

func (d *decoder) action(n *yaml.Node, what string) Action {
	n = d.resolve(n)
	a := Action{Pos: d.pos(n)}
	if n != nil && n.Kind == yaml.ScalarNode && !d.isNull(n) {
		// `then: continue`
		a.Do = n.Value
	} else {
		ps, _ := d.mapping(n, what)
		for _, p := range ps {
			switch p.key {
			case "do":
				a.Do, _ = d.str(p.v, what+".do")
			case "attempts", "max_attempts":
				v, _ := d.nonNegInt(p.v, what+"."+p.key)
				a.Attempts = int(min(v, math.MaxInt32))
			case "backoff":
				a.Backoff, _ = d.str(p.v, what+".backoff")
				if a.Backoff != "" && !slices.Contains(backoffKinds, a.Backoff) {
					d.errorf(p.v, "%s: bad backoff %q (want none, fixed, linear or exponential)", what, a.Backoff)
				}
			case "delay":
				a.Delay, _ = d.seconds(p.v, what+".delay")
			case "to":
				a.To, _ = d.str(p.v, what+".to")
			case "set":
				a.Set = d.assignments(p.v, what+".set")
			default:
				d.warnf(p.k, "%s: unknown action key %q (ignored)", what, p.key)
			}
		}
	}
	switch {
	case a.Do == "":
		a.Do = DoContinue
	case !slices.Contains(policyActions, a.Do):
		d.errorAt(a.Pos, "%s: bad do %q (want continue, retry, break, jump or fail)", what, a.Do)
	}
	if a.Do == DoJump && a.To == "" {
		d.errorAt(a.Pos, "%s: do: jump needs to:", what)
	}
	if a.Do == DoRetry && a.Attempts == 0 {
		a.Attempts = DefaultRetryAttempts
	}
	if a.Backoff == "" {
		if a.Delay > 0 {
			a.Backoff = BackoffFixed
		} else {
			a.Backoff = BackoffNone
		}
	}
	return a
}
