package dsl

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Two places where gonja parts from Jinja2, mended here without touching
// gonja:
//
//   - Conditional expressions. gonja parses `A if C else B` only as the
//     whole of a {{ }}; Jinja2 allows it anywhere an expression goes
//     (inside parentheses, list and dict literals, call and filter
//     arguments, the else branch of another conditional). Before gonja
//     parses a template, rewriteConditionals turns each conditional into
//     `((C) and [A] or [B])[0]`: `and`/`or` short-circuit and return their
//     operands in gonja as in Jinja2, and [A] is never falsy, so exactly
//     one of A and B is evaluated, as Jinja2 does.
//   - Arithmetic. gonja's `/` returns +Inf for a zero divisor, `//`
//     truncates toward zero and overflows on zero, `%` panics on zero and
//     takes Go's sign. After parsing, those operators are replaced by
//     filters with Python's semantics that raise on a zero divisor
//     ("division by zero", as Jinja2 does); `%` with a string on the left
//     is printf-style formatting.

// rewriteConditionals returns src with the conditional expressions of its
// {{ }} bodies and {% set %} values rewritten as the package comment says.
func rewriteConditionals(src string) string {
	if !strings.Contains(src, "if") || !strings.Contains(src, "else") {
		return src
	}
	var b strings.Builder
	rest := src
	// Where the next {{ and {% start in src (-1: none left), searched for
	// again only once passed: searching the rest for the delimiter on
	// every tag made a template of many tags of one kind quadratic (a
	// playbook of a megabyte took minutes to parse).
	nextExpr, nextTag := -2, -2
	for {
		off := len(src) - len(rest)
		i := nextIndex(src, off, "{{", &nextExpr)
		j := nextIndex(src, off, "{%", &nextTag)
		if i < 0 && j < 0 {
			b.WriteString(rest)
			return b.String()
		}
		tag := i < 0 || (j >= 0 && j < i)
		start := i
		if tag {
			start = j
		}
		b.WriteString(rest[:start+2])
		body := rest[start+2:]
		if strings.HasPrefix(body, "-") || strings.HasPrefix(body, "+") {
			// Whitespace control belongs to the delimiter.
			b.WriteByte(body[0])
			body = body[1:]
		}
		end := exprEnd(body, tag)
		if end < 0 {
			b.WriteString(body)
			return b.String()
		}
		expr := body[:end]
		switch {
		case !tag:
			expr = rewriteExpr(expr, true)
		default:
			expr = rewriteSetTag(expr)
		}
		b.WriteString(expr)
		rest = body[end:]
	}
}

// nextIndex returns where the first delim at or after off in src starts,
// relative to off, or -1; *cached holds its last answer (absolute; -1:
// none left), searched for again only when it lies before off.
func nextIndex(src string, off int, delim string, cached *int) int {
	if *cached != -1 && *cached < off {
		*cached = -1
		if k := strings.Index(src[off:], delim); k >= 0 {
			*cached = off + k
		}
	}
	if *cached < 0 {
		return -1
	}
	return *cached - off
}

// exprEnd returns where the }} (or %}) closing body starts, skipping
// string literals; -1 if there is none.
func exprEnd(body string, tag bool) int {
	closer := "}}"
	if tag {
		closer = "%}"
	}
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '\'' || c == '"':
			i = skipString(body, i)
		case strings.HasPrefix(body[i:], closer):
			if i > 0 && body[i-1] == '-' {
				return i - 1
			}
			return i
		}
	}
	return -1
}

// skipString returns the index of the quote closing the string literal
// that opens at i (or len-1).
func skipString(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j
		}
	}
	return len(s) - 1
}

// rewriteSetTag rewrites the value of a {% set name = value %} tag, and
// the bracketed parts of any other tag (the if of `{% for x in xs if c %}`
// is the tag's own).
func rewriteSetTag(body string) string {
	trimmed := strings.TrimLeft(body, " \t\n-")
	if !strings.HasPrefix(trimmed, "set ") {
		return rewriteGroups(body)
	}
	eq := topLevelIndex(body, '=')
	if eq < 0 {
		return body
	}
	return body[:eq+1] + rewriteExpr(body[eq+1:], false)
}

// scanTop calls visit for each byte of s from from on, string literals
// skipped, with the bracket depth it stands at (an opening bracket at the
// depth outside it, a closing one at the depth it returns to). It returns
// the index where visit returned true, else -1.
func scanTop(s string, from int, visit func(i, depth int) bool) int {
	depth := 0
	for i := from; i < len(s); i++ {
		switch s[i] {
		case '\'', '"':
			i = skipString(s, i)
			continue
		case '(', '[', '{':
			if visit(i, depth) {
				return i
			}
			depth++
			continue
		case ')', ']', '}':
			depth--
		}
		if visit(i, depth) {
			return i
		}
	}
	return -1
}

// topLevelIndex returns the first index of c outside strings and brackets
// (and not part of ==, !=, <=, >=).
func topLevelIndex(s string, c byte) int {
	return scanTop(s, 0, func(i, depth int) bool {
		if depth != 0 || s[i] != c {
			return false
		}
		comparison := i+1 < len(s) && s[i+1] == '=' || i > 0 && strings.ContainsRune("=!<>", rune(s[i-1]))
		return c != '=' || !comparison
	})
}

// rewriteExpr rewrites the conditionals of one expression. top is true for
// a whole {{ }} body, where gonja itself handles `A if C` without else.
func rewriteExpr(s string, top bool) string {
	return ternary(rewriteGroups(s), top)
}

// rewriteGroups rewrites the conditionals inside the bracket groups of s,
// innermost out: their items are expressions separated by commas (and
// colons in dicts and slices).
func rewriteGroups(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\'', '"':
			j := skipString(s, i)
			b.WriteString(s[i : j+1])
			i = j
		case '(', '[', '{':
			j := matchingBracket(s, i)
			if j < 0 {
				b.WriteString(s[i:])
				i = len(s)
				continue
			}
			b.WriteByte(c)
			b.WriteString(rewriteItems(s[i+1 : j]))
			b.WriteByte(s[j])
			i = j
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// rewriteItems rewrites each comma- or colon-separated item of a bracket
// group's content.
func rewriteItems(s string) string {
	var b strings.Builder
	last := 0
	scanTop(s, 0, func(i, depth int) bool {
		if depth == 0 && (s[i] == ',' || s[i] == ':') {
			b.WriteString(rewriteExpr(s[last:i], false))
			b.WriteByte(s[i])
			last = i + 1
		}
		return false
	})
	b.WriteString(rewriteExpr(s[last:], false))
	return b.String()
}

func matchingBracket(s string, open int) int {
	return scanTop(s, open, func(i, depth int) bool {
		return i > open && depth == 0 && strings.IndexByte(")]}", s[i]) >= 0
	})
}

// ternary rewrites `A if C else B` at the top level of s (its brackets
// already rewritten). B may itself be a conditional.
func ternary(s string, top bool) string {
	ifAt := keywordAt(s, "if", 0)
	if ifAt < 0 {
		return s
	}
	elseAt := keywordAt(s, "else", ifAt+2)
	if elseAt < 0 {
		if top {
			return s // gonja's own {{ A if C }}
		}
		a, c := strings.TrimSpace(s[:ifAt]), strings.TrimSpace(s[ifAt+2:])
		return lead(s) + "((" + c + ") and [" + a + "] or [none])[0]" + trail(s)
	}
	a := strings.TrimSpace(s[:ifAt])
	c := strings.TrimSpace(s[ifAt+2 : elseAt])
	alt := strings.TrimSpace(ternary(s[elseAt+4:], false))
	if a == "" || c == "" || alt == "" {
		return s // malformed: let gonja report it
	}
	return lead(s) + "((" + c + ") and [" + a + "] or [" + alt + "])[0]" + trail(s)
}

func lead(s string) string  { return s[:len(s)-len(strings.TrimLeft(s, " \t\r\n"))] }
func trail(s string) string { return s[len(strings.TrimRight(s, " \t\r\n")):] }

// keywordAt returns the index of the first keyword kw at or after from
// outside strings and brackets, as a whole word; -1 if none.
func keywordAt(s, kw string, from int) int {
	return scanTop(s, from, func(i, depth int) bool {
		return depth == 0 && strings.HasPrefix(s[i:], kw) && !wordChar(s, i-1) && !wordChar(s, i+len(kw))
	})
}

func wordChar(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// arithmeticFilters maps gonja's arithmetic operator tokens to the filters
// that replace them.
var arithmeticFilters = map[tokens.Type]string{
	tokens.Division:      "_truediv",
	tokens.FloorDivision: "_floordiv",
	tokens.Modulo:        "_mod",
	// The operators that can build large strings and lists: the same
	// values as gonja's, checked against the render budget (limits.go).
	tokens.Multiply:    filterMul,
	tokens.Addition:    filterAdd,
	tokens.Subtraction: "_sub",
	tokens.Tilde:       filterConcat,
}

// pythonArithmetic replaces a division or modulo node by its filter; nil
// when n is anything else.
func pythonArithmetic(n *nodes.BinaryExpression) nodes.Expression {
	if n.Operator == nil || n.Operator.Token == nil {
		return nil
	}
	name, ok := arithmeticFilters[n.Operator.Token.Type]
	if !ok {
		return nil
	}
	return &nodes.FilteredExpression{
		Expression: n.Left,
		Filters:    []*nodes.FilterCall{{Token: n.Operator.Token, Name: name, Args: []nodes.Expression{n.Right}}},
	}
}

// replaceArithmetic swaps the expression held by the interface value v
// (a field or slice element of a parsed node) for its Python-semantics
// filter when it is a division or modulo.
func replaceArithmetic(v reflect.Value) {
	if v.Elem().Type() != reflect.TypeFor[*nodes.BinaryExpression]() || v.Elem().IsNil() {
		return
	}
	bin := (*nodes.BinaryExpression)(v.Elem().UnsafePointer())
	repl := pythonArithmetic(bin)
	if repl == nil || !reflect.TypeOf(repl).AssignableTo(v.Type()) {
		return
	}
	if !v.CanSet() {
		if !v.CanAddr() {
			return
		}
		v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	v.Set(reflect.ValueOf(repl))
}

var errZeroDivision = errors.New("division by zero")

// arithmetic filters --------------------------------------------------------

func numberArgs(in *exec.Value, params *exec.VarArgs) (l, r *exec.Value, err error) {
	r = arg(params, 0, "")
	if r == nil {
		return nil, nil, errors.New("missing operand")
	}
	for _, v := range []*exec.Value{in, r} {
		if !v.IsNumber() && !v.IsBool() {
			return nil, nil, fmt.Errorf("unsupported operand %s", describeOperand(v))
		}
	}
	return pyNumber(in), pyNumber(r), nil
}

func describeOperand(v *exec.Value) string {
	if v.IsNil() {
		return "none"
	}
	return fmt.Sprintf("%q", v.String())
}

func filterTrueDiv(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	l, r, err := numberArgs(in, params)
	if err != nil {
		return exec.AsValue(fmt.Errorf("/: %w", err))
	}
	if r.Float() == 0 {
		return exec.AsValue(errZeroDivision)
	}
	return exec.AsValue(l.Float() / r.Float())
}

func filterFloorDiv(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	l, r, err := numberArgs(in, params)
	if err != nil {
		return exec.AsValue(fmt.Errorf("//: %w", err))
	}
	if l.IsFloat() || r.IsFloat() {
		if r.Float() == 0 {
			return exec.AsValue(errZeroDivision)
		}
		return exec.AsValue(math.Floor(l.Float() / r.Float()))
	}
	a, b := int64(l.Integer()), int64(r.Integer())
	if b == 0 {
		return exec.AsValue(errors.New("integer division or modulo by zero"))
	}
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return exec.AsValue(q)
}

func filterMod(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsString() {
		return printfFormat(in.String(), arg(params, 0, ""))
	}
	l, r, err := numberArgs(in, params)
	if err != nil {
		return exec.AsValue(fmt.Errorf("%%: %w", err))
	}
	if l.IsFloat() || r.IsFloat() {
		a, b := l.Float(), r.Float()
		if b == 0 {
			return exec.AsValue(errors.New("float modulo"))
		}
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return exec.AsValue(m)
	}
	a, b := int64(l.Integer()), int64(r.Integer())
	if b == 0 {
		return exec.AsValue(errors.New("integer division or modulo by zero"))
	}
	m := a % b
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return exec.AsValue(m)
}

// printfFormat is Python's "format" % args for the common conversions
// (%s %d %i %f %.Nf %r %x %%), args one value or a list/tuple of them.
func printfFormat(format string, args *exec.Value) *exec.Value {
	var vals []*exec.Value
	if args != nil && args.IsList() {
		for i := 0; i < args.Len(); i++ {
			vals = append(vals, args.Index(i))
		}
	} else if args != nil {
		vals = []*exec.Value{args}
	}
	var b strings.Builder
	next := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("0123456789.-+ #", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			return exec.AsValue(errors.New("incomplete format"))
		}
		verb, flags := format[j], format[i+1:j]
		i = j
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if next >= len(vals) {
			return exec.AsValue(errors.New("not enough arguments for format string"))
		}
		v := vals[next]
		next++
		switch verb {
		case 's':
			s, err := formatString(toPlainValue(v))
			if err != nil {
				return exec.AsValue(err)
			}
			fmt.Fprintf(&b, "%"+flags+"s", s)
		case 'r':
			fmt.Fprintf(&b, "%"+flags+"s", pyRepr(toPlainValue(v)))
		case 'd', 'i':
			fmt.Fprintf(&b, "%"+flags+"d", int64(v.Integer()))
		case 'f', 'F', 'e', 'E', 'g', 'G':
			f := flags
			if verb == 'f' && !strings.Contains(f, ".") {
				f += ".6"
			}
			fmt.Fprintf(&b, "%"+f+string(verb), v.Float())
		case 'x', 'X', 'o':
			fmt.Fprintf(&b, "%"+flags+string(verb), int64(v.Integer()))
		default:
			return exec.AsValue(fmt.Errorf("unsupported format character %q", verb))
		}
	}
	if next < len(vals) {
		return exec.AsValue(errors.New("not all arguments converted during string formatting"))
	}
	return exec.AsValue(b.String())
}

func toPlainValue(v *exec.Value) any {
	p, err := toPlain(v)
	if err != nil {
		return v.String()
	}
	return p
}

func pyRepr(v any) string {
	switch x := v.(type) {
	case string:
		return "'" + strings.ReplaceAll(x, "'", "\\'") + "'"
	case nil:
		return "None"
	}
	s, _ := formatString(v)
	return s
}
