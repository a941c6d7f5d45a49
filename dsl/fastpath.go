package dsl

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"

	"github.com/cursorflow/cursorflow/internal/sqlquote"
)

// The fast path renders templates that are text plus simple expressions
// (names, attribute and item access, literals, and filters that need
// nothing from the render but their input and arguments) without gonja's
// evaluator. It is compiled from the tree gonja parsed (after
// guardTemplate rewrote it), so the grammar is gonja's own, and it runs
// the very filter functions gonja would call. It gives up (errNotFast),
// and the template is rendered by gonja, on anything whose result it does
// not reproduce exactly: a value of a type it does not know, an index it
// would have to guess about, a filter that fails (gonja words the error),
// output past the render's limits.

// errNotFast reports that the fast path cannot render this template with
// these variables exactly as gonja does; the caller renders with gonja.
var errNotFast = errors.New("dsl: not on the fast path")

// fastFilters are the filters the fast path calls directly: each reads
// only its input and arguments (never the evaluator nor the render's
// budget) and changes neither.
var fastFilters = map[string]bool{
	"int": true, "float": true, "string": true, "tojson": true, "to_json": true,
	"fromjson": true, "from_json": true, "lower": true, "upper": true, "trim": true,
	"default": true, "d": true, "length": true, "count": true, "replace": true,
	"first": true, "last": true, "b64encode": true, "b64decode": true,
	"sql_literal": true, "sql_ident": true,
	"_truediv": true, "_floordiv": true, "_mod": true,
}

// fastExpr is an expression compiled for the fast path.
type fastExpr interface {
	// eval returns the expression's value, or errNotFast.
	eval(vars map[string]any) (any, error)
}

// fastTemplate is a template compiled for the fast path: text pieces and
// expressions in order (a native template has one expression and no
// text).
type fastTemplate struct {
	pieces []fastPiece
}

type fastPiece struct {
	text string
	expr fastExpr
}

// compileFast compiles root for the fast path; nil when some node is
// beyond it. native says the template is one {{ expression }}.
func compileFast(root *nodes.Template, env *environment, native bool) *fastTemplate {
	ft, _ := explainFast(root, env, native)
	return ft
}

// explainFast is compileFast, with the reason a template is left to
// gonja.
func explainFast(root *nodes.Template, env *environment, native bool) (*fastTemplate, string) {
	if root == nil || root.Parent != nil || len(root.Macros) > 0 || len(root.Blocks) > 0 {
		return nil, "inheritance or macros"
	}
	c := &fastCompiler{env: env}
	ft := &fastTemplate{}
	for _, n := range root.Nodes {
		switch n := n.(type) {
		case *nodes.Comment:
		case *nodes.Data:
			if n.Data == nil {
				return nil, "empty data node"
			}
			if !native {
				ft.pieces = append(ft.pieces, fastPiece{text: dataText(n)})
			}
		case *nodes.Output:
			if n.Condition != nil || n.Alternative != nil || n.Expression == nil {
				return nil, "{{ a if b }}"
			}
			e := c.expr(n.Expression)
			if e == nil {
				return nil, c.reason
			}
			ft.pieces = append(ft.pieces, fastPiece{expr: e})
		default:
			return nil, "control structure"
		}
	}
	if native && (len(ft.pieces) != 1 || ft.pieces[0].expr == nil) {
		return nil, "not one expression"
	}
	return ft, ""
}

// dataText is the text gonja's renderer writes for a data node: the
// node's flags say which whitespace {%- -%}, {{- -}} and the block
// settings take away.
func dataText(n *nodes.Data) string {
	const space = " \r\n\t"
	text := n.Data.Val
	if n.RemoveFirstLineReturn {
		// As gonja does it: a CRLF, then (again) an LF.
		text = strings.TrimPrefix(strings.TrimPrefix(text, "\r\n"), "\n")
	}
	if n.Trim.Left {
		text = strings.TrimLeft(text, space)
	}
	if n.Trim.Right {
		text = strings.TrimRight(text, space)
	}
	if n.RemoveTrailingWhiteSpaceFromLastLine {
		// Only the last line loses its trailing blanks.
		cut := strings.LastIndexByte(text, '\n') + 1
		text = text[:cut] + strings.TrimRight(text[cut:], space)
	}
	return text
}

type fastCompiler struct {
	env *environment
	// reason says why the first expression beyond the fast path is.
	reason string
}

func (c *fastCompiler) beyond(reason string) fastExpr {
	if c.reason == "" {
		c.reason = reason
	}
	return nil
}

// expr compiles one expression node; nil when it is beyond the fast path.
func (c *fastCompiler) expr(n nodes.Node) fastExpr {
	switch n := n.(type) {
	case *nodes.None:
		return fastLit{nil}
	case *nodes.String:
		return fastLit{n.Val}
	case *nodes.Integer:
		return fastLit{n.Val}
	case *nodes.Float:
		return fastLit{n.Val}
	case *nodes.Bool:
		return fastLit{n.Val}
	case *nodes.UnaryExpression:
		// A signed number literal, folded as gonja computes it.
		switch term := n.Term.(type) {
		case *nodes.Integer:
			if n.Negative {
				return fastLit{-1 * term.Val}
			}
			return fastLit{term.Val}
		case *nodes.Float:
			if n.Negative {
				return fastLit{-1 * term.Val}
			}
			return fastLit{term.Val}
		}
		return c.beyond("UnaryExpression")
	case *nodes.Name:
		if n.Name == nil {
			return nil
		}
		name := n.Name.Val
		// Globals (and the renderer's self) resolve in gonja's context,
		// not in vars.
		if name == "self" || name == budgetVar || c.env.env.Context.Has(name) {
			return c.beyond("global " + name)
		}
		return fastName{name}
	case *nodes.BinaryExpression:
		// guardTemplate's X or [] (see orEmptyList).
		if n.Operator == nil || n.Operator.Token == nil || n.Operator.Token.Type != tokens.Or {
			return c.beyond("operator")
		}
		if l, ok := n.Right.(*nodes.List); !ok || len(l.Val) != 0 {
			return c.beyond("operator")
		}
		x := c.expr(n.Left)
		if x == nil {
			return nil
		}
		return fastOrEmpty{x}
	case *nodes.GetAttribute:
		x := c.expr(n.Node)
		if x == nil {
			return nil
		}
		if n.Attribute != "" {
			return fastAttr{x: x, name: n.Attribute}
		}
		return fastIndex{x: x, index: fastLit{n.Index}, attr: true}
	case *nodes.GetItem:
		x := c.expr(n.Node)
		if x == nil || n.Arg == nil {
			return nil
		}
		arg := c.expr(n.Arg)
		if arg == nil {
			return nil
		}
		return fastIndex{x: x, index: arg}
	case *nodes.FilteredExpression:
		x := c.expr(n.Expression)
		if x == nil {
			return nil
		}
		for _, fc := range n.Filters {
			if x = c.filter(x, fc); x == nil {
				return nil
			}
		}
		return x
	}
	return c.beyond(strings.TrimPrefix(fmt.Sprintf("%T", n), "*nodes."))
}

func (c *fastCompiler) filter(in fastExpr, fc *nodes.FilterCall) fastExpr {
	if fc == nil || !fastFilters[fc.Name] {
		if fc != nil && strings.HasPrefix(fc.Name, "__cursorflow") {
			return c.beyond("operator")
		}
		return c.beyond("filter")
	}
	fn, ok := c.env.env.Filters.Get(fc.Name)
	if !ok {
		return nil
	}
	// Without a dialect argument, sql_literal and sql_ident quote for the
	// render's SQLDialectVar, which only gonja's filters read.
	dialected := (fc.Name == "sql_literal" || fc.Name == "sql_ident") && len(fc.Args) == 0 && fc.Kwargs["dialect"] == nil
	if direct := directFilters[fc.Name]; direct != nil && len(fc.Args) == 0 && len(fc.Kwargs) == 0 {
		f := &fastDirect{in: in, fn: direct, filter: fn, dialected: dialected}
		if j, ok := in.(*fastDirect); ok && fc.Name == "sql_literal" && (j.name == "tojson" || j.name == "to_json") {
			f.json = j
		}
		f.name = fc.Name
		return f
	}
	f := &fastFilter{in: in, fn: fn, dialected: dialected}
	constant := true
	for _, a := range fc.Args {
		e := c.expr(a)
		if e == nil {
			return nil
		}
		if _, lit := e.(fastLit); !lit {
			constant = false
		}
		f.args = append(f.args, e)
	}
	if len(fc.Kwargs) > 0 {
		f.kwargs = map[string]fastExpr{}
		for k, a := range fc.Kwargs {
			e := c.expr(a)
			if e == nil {
				return nil
			}
			if _, lit := e.(fastLit); !lit {
				constant = false
			}
			f.kwargs[k] = e
		}
	}
	if constant {
		// Literal arguments are evaluated once; the filters only read them.
		p, err := f.params(nil)
		if err != nil {
			return nil
		}
		f.constParams = p
	}
	return f
}

type fastLit struct{ v any }

func (e fastLit) eval(map[string]any) (any, error) { return e.v, nil }

type fastName struct{ name string }

func (e fastName) eval(vars map[string]any) (any, error) {
	return known(vars[e.name])
}

// known passes the values whose handling the fast path knows exactly:
// gonja unpacks *exec.Value and reflect.Value it finds in data, and
// fails on an error value.
func known(v any) (any, error) {
	switch v.(type) {
	case *exec.Value, reflect.Value, *reflect.Value, error:
		return nil, errNotFast
	}
	return v, nil
}

// emptyList stands for the [] of X or []; nothing writes to it.
var emptyList = []any{}

type fastOrEmpty struct{ x fastExpr }

func (e fastOrEmpty) eval(vars map[string]any) (any, error) {
	v, err := e.x.eval(vars)
	if err != nil {
		return nil, err
	}
	t, ok := isTrue(v)
	if !ok {
		return nil, errNotFast
	}
	if t {
		return v, nil
	}
	return emptyList, nil
}

// isTrue is gonja's Value.IsTrue for the types the fast path knows.
func isTrue(v any) (truth, ok bool) {
	switch x := v.(type) {
	case nil:
		return false, true
	case bool:
		return x, true
	case string:
		return x != "", true
	case int:
		return x != 0, true
	case int64:
		return x != 0, true
	case float64:
		return x != 0, true
	case []any:
		return len(x) > 0, true
	case map[string]any:
		return len(x) > 0, true
	}
	return false, false
}

type fastAttr struct {
	x    fastExpr
	name string
}

func (e fastAttr) eval(vars map[string]any) (any, error) {
	v, err := e.x.eval(vars)
	if err != nil {
		return nil, err
	}
	return attribute(v, e.name)
}

// attribute is gonja's x.name (and x['name']): a map's key, and nothing
// (undefined) on the unnamed scalar and list types, which have no methods.
func attribute(v any, name string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		return known(x[name])
	case string, bool, int, int64, float64, []any:
		return nil, nil
	}
	return nil, errNotFast
}

type fastIndex struct {
	x, index fastExpr
	// attr: x.0, which never falls back to an attribute.
	attr bool
}

func (e fastIndex) eval(vars map[string]any) (any, error) {
	v, err := e.x.eval(vars)
	if err != nil {
		return nil, err
	}
	k, err := e.index.eval(vars)
	if err != nil {
		return nil, err
	}
	switch k := k.(type) {
	case string:
		if e.attr {
			return nil, errNotFast
		}
		return attribute(v, k)
	case int:
		return index(v, k)
	case int64:
		if int64(int(k)) != k {
			return nil, errNotFast
		}
		return index(v, int(k))
	}
	return nil, errNotFast
}

// index is gonja's x[i] on a list, negative indexes included (gonja
// finds x[-n] only when n < len(x)). Strings (gonja indexes bytes) and
// everything else are left to gonja.
func index(v any, i int) (any, error) {
	x, ok := v.([]any)
	if !ok {
		return nil, errNotFast
	}
	switch {
	case i >= 0 && len(x) > i:
		return known(x[i])
	case i < 0 && len(x) > -i:
		return known(x[len(x)+i])
	}
	return nil, nil
}

type fastFilter struct {
	in          fastExpr
	fn          exec.FilterFunction
	args        []fastExpr
	kwargs      map[string]fastExpr
	constParams *exec.VarArgs
	dialected   bool // see otherDialect
}

// otherDialect reports whether a filter that quotes SQL for the render's
// dialect (dialected) meets one other than PostgreSQL's: gonja renders
// it, its filter reading SQLDialectVar.
func otherDialect(dialected bool, vars map[string]any) bool {
	if !dialected {
		return false
	}
	d, ok := vars[SQLDialectVar]
	return ok && d != sqlquote.Postgres
}

func (f *fastFilter) params(vars map[string]any) (*exec.VarArgs, error) {
	p := &exec.VarArgs{Args: make([]*exec.Value, 0, len(f.args)), KwArgs: make(map[string]*exec.Value, len(f.kwargs))}
	for _, a := range f.args {
		v, err := a.eval(vars)
		if err != nil {
			return nil, err
		}
		p.Args = append(p.Args, exec.AsValue(v))
	}
	for k, a := range f.kwargs {
		v, err := a.eval(vars)
		if err != nil {
			return nil, err
		}
		p.KwArgs[k] = exec.AsValue(v)
	}
	return p, nil
}

func (f *fastFilter) eval(vars map[string]any) (any, error) {
	if otherDialect(f.dialected, vars) {
		return nil, errNotFast
	}
	in, err := f.in.eval(vars)
	if err != nil {
		return nil, err
	}
	p := f.constParams
	if p == nil {
		if p, err = f.params(vars); err != nil {
			return nil, err
		}
	}
	out := f.fn(nil, exec.AsValue(in), p)
	if out == nil || out.IsError() {
		// gonja words the failure.
		return nil, errNotFast
	}
	return known(out.Interface())
}

// directFilters compute, for the commonest filters called without
// arguments, what the filter function gives, from the same helpers but
// without wrapping values for gonja. ok false: call the filter function.
var directFilters = map[string]func(x any) (v any, ok bool){
	// filterInt with base 10 and default 0.
	"int": func(x any) (any, bool) {
		if n, ok := toInt64(x, 10); ok {
			return n, true
		}
		return int64(0), true
	},
	// filterToJSON without indent. writeJSON makes plain what it meets
	// as toPlain would have beforehand.
	"tojson":  directToJSON,
	"to_json": directToJSON,
	// filterSQLLiteral of a string, in the default dialect.
	"sql_literal": func(x any) (any, bool) {
		s, isString := x.(string)
		if !isString {
			return nil, false
		}
		lit, ok, err := sqlquote.Scalar(s, sqlquote.Postgres)
		if !ok || err != nil {
			return nil, false
		}
		return lit, true
	},
}

func directToJSON(x any) (any, bool) {
	s, err := marshalJSON(x, 0)
	if err != nil {
		return nil, false
	}
	return s, true
}

// fastDirect is a filter of directFilters; filter is its gonja function,
// for the inputs the direct one leaves to it.
type fastDirect struct {
	in        fastExpr
	fn        func(any) (any, bool)
	filter    exec.FilterFunction
	dialected bool   // see otherDialect
	name      string // the filter's
	// json is set on sql_literal over tojson (to_json), the filter it
	// reads: see appendTo.
	json *fastDirect
}

func (f *fastDirect) eval(vars map[string]any) (any, error) {
	if otherDialect(f.dialected, vars) {
		return nil, errNotFast
	}
	in, err := f.in.eval(vars)
	if err != nil {
		return nil, err
	}
	if v, ok := f.fn(in); ok {
		return v, nil
	}
	out := f.filter(nil, exec.AsValue(in), exec.NewVarArgs())
	if out == nil || out.IsError() {
		return nil, errNotFast
	}
	return known(out.Interface())
}

// appendTo appends the text of f, sql_literal over tojson (f.json), to
// b: the JSON of the value tojson reads, quoted as a PostgreSQL string,
// written straight into the render's text. That is what outputString of
// eval's value would append (the JSON, then its literal, are strings the
// filters make only for the render to copy; a frame body splicing its
// rows into one statement makes two of the frame's size). Whatever is
// not that plain case (a dialect, a value tojson leaves to gonja, text
// sql_literal refuses) is eval's.
func (f *fastDirect) appendTo(b []byte, vars map[string]any) ([]byte, error) {
	if otherDialect(f.dialected, vars) {
		return b, errNotFast
	}
	in, err := f.json.in.eval(vars)
	if err != nil {
		return b, err
	}
	scratch := getScratch()
	defer putScratch(scratch)
	text, err := appendJSON(scratch.b[:0], in, 0, 0, 0)
	scratch.b = text
	if err == nil {
		if out, err := sqlquote.AppendString(b, text, sqlquote.Postgres); err == nil {
			return out, nil
		}
	}
	v, err := f.eval(vars)
	if err != nil {
		return b, err
	}
	return append(b, outputString(v)...), nil
}

// renderFast renders t on the fast path; errNotFast when gonja must.
func (t *Template) renderFast(vars map[string]any) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, errNotFast
		}
	}()
	ft := t.fast
	if t.kind == kindNative {
		if d, ok := ft.pieces[0].expr.(*fastDirect); ok && d.json != nil {
			// The literal is a string: built where appendTo writes it,
			// then copied out once.
			scratch := getScratch()
			defer putScratch(scratch)
			b, err := d.appendTo(scratch.b[:0], vars)
			scratch.b = b
			if err != nil {
				return nil, err
			}
			return string(b), nil
		}
		x, err := ft.pieces[0].expr.eval(vars)
		if err != nil {
			return nil, err
		}
		p, err := plainOf(x, 0)
		if err != nil {
			return nil, t.fail(err)
		}
		return p, nil
	}
	lim := t.limits.get()
	start := time.Now()
	// The text is built in a reused buffer and copied out once: one
	// allocation of its size.
	scratch := getScratch()
	defer putScratch(scratch)
	b := scratch.b[:0]
	for _, p := range ft.pieces {
		if d, ok := p.expr.(*fastDirect); ok && d.json != nil {
			if b, err = d.appendTo(b, vars); err != nil {
				return nil, err
			}
			scratch.b = b
			if len(b) > lim.MaxBytes {
				// gonja reports the limit.
				return nil, errNotFast
			}
			continue
		}
		s := p.text
		if p.expr != nil {
			x, err := p.expr.eval(vars)
			if err != nil {
				return nil, err
			}
			s = outputString(x)
		}
		if len(b)+len(s) > lim.MaxBytes {
			// gonja reports the limit.
			return nil, errNotFast
		}
		b = append(b, s...)
		scratch.b = b
	}
	if time.Since(start) > lim.Timeout {
		return nil, errNotFast
	}
	return string(b), nil
}

// outputString is what gonja writes for a {{ }} value (Value.String).
func outputString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	}
	return exec.AsValue(v).String()
}
