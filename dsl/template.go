package dsl

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Template is a Jinja2 template compiled once when the playbook is parsed
// and rendered many times. Rendering is safe for concurrent use.
//
// A template whose source is exactly one {{ expression }} (surrounding
// whitespace allowed) renders to the expression's native value (list, map,
// number, bool, nil). Any other template renders to text, which Render
// then reads as NoETL's render_template does: JSON or a Python literal
// ("[1, 2]", "{'a': 1}", "'x'"), true/false in any case, digits, a float,
// none/null; anything else stays text, and so does an int past int64
// (every digit kept) and the text of a template that uses tojson,
// sql_literal or sql_ident (RenderString always gives the text). Unlike
// NoETL, which renders a filtered or conditional single expression to
// text and reads that too, a single expression keeps its value: a string
// stays a string ("{{ zip | trim }}" stays "007"; write a flag as
// {{ true if x else false }}, not as the text 'true'). A source with no
// template syntax at all is a constant and renders without gonja.
//
// Native values are normalised to plain Go values the caller owns:
// []any, map[string]any, string, int64 (every integer kind), float64,
// bool and nil. Maps and lists are always freshly allocated, so the
// result never aliases the render variables.
//
// Undefined names and missing attributes, keys and indexes evaluate to
// undefined (nil) instead of failing, and so does any attribute or item
// access on an undefined or None value: output.data.rows[0].x is undefined
// when rows is missing or empty. gonja does not distinguish None from
// undefined; both are nil.
type Template struct {
	Source string
	Pos    Pos

	kind tmplKind
	// constant is Source boxed once, so constant renders do not allocate.
	constant any
	// tpl renders text templates.
	tpl *exec.Template
	// out is the single {{ }} node of a native template.
	out *nodes.Output
	// shareVars is true when evaluating out can neither write to the
	// context nor need the global functions, so the caller's vars map can
	// back the evaluation context directly (no copy per render).
	shareVars bool
	// needsBudget is true when the template calls something that reads
	// the render's budget from its context (range, guarded operators,
	// sized filters).
	needsBudget bool
	// limits are the playbook's (nil: the defaults).
	limits *limitsRef
	// names are the variable names the template reads, for Refs.
	names []string
	// iterAttrs are the attributes of iter it reads, for the loop lint;
	// workloadAttrs those of workload, for the workload lint.
	iterAttrs, workloadAttrs []string
	// taskRefs are the STEP.results.TASK it reads, as {STEP, TASK}, for
	// the task results lint.
	taskRefs [][2]string
	// fast renders the template without gonja when it is text plus
	// simple expressions (fastpath.go); nil otherwise.
	fast *fastTemplate
	// keepText: a text template whose source uses tojson renders to its
	// text, not the value the text reads as (coerceText).
	keepText bool
}

type tmplKind uint8

const (
	kindConstant tmplKind = iota
	kindNative
	kindText
)

// RenderError is a failure while rendering a template. Callers add their
// own context (step, field) by wrapping it; errors.As reaches it.
type RenderError struct {
	// Pos is where the template starts in the playbook.
	Pos Pos
	// Snippet is the template source, shortened to one line for messages.
	Snippet string
	// Err is the underlying gonja or filter error.
	Err error
}

// Error formats the error as pos: template "snippet": cause.
func (e *RenderError) Error() string {
	return fmt.Sprintf("%s: template %q: %v", e.Pos, e.Snippet, e.Err)
}

// Unwrap returns the underlying error.
func (e *RenderError) Unwrap() error { return e.Err }

// snippetLimit bounds the template source quoted in error messages.
const snippetLimit = 80

func snippet(src string) string {
	s := strings.Join(strings.Fields(src), " ")
	if r := []rune(s); len(r) > snippetLimit {
		s = string(r[:snippetLimit-3]) + "..."
	}
	return s
}

// environment is the gonja environment every template shares. It is
// built once from copies of gonja's builtins plus our filters and never
// changed afterwards, so sharing it between goroutines is safe. gonja's
// package-level defaults are left untouched. gonja logs through logrus
// only when its logging package is enabled, which is off by default; we
// never enable it.
type environment struct {
	cfg     *config.Config
	env     *exec.Environment
	globals map[string]bool
}

var sharedEnvironment = sync.OnceValue(newEnvironment)

// unsupportedControlStructures need a template loader (other files), which
// playbook templates do not have, or define macros: a macro that calls
// itself recurses until the Go stack overflows, which kills the process
// (no recover can catch it).
var unsupportedControlStructures = map[string]bool{
	"extends": true, "include": true, "import": true, "from": true,
	"macro": true, "call": true,
}

func newEnvironment() *environment {
	cfg := config.New()
	cfg.StrictUndefined = false
	cfg.AutoEscape = false
	cfg.KeepTrailingNewline = false

	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	ours := templateFilters()
	for name, fn := range guardedOperators() {
		ours[name] = fn
	}
	for _, name := range sizedFilters {
		if fn, ok := builtins.Filters.Get(name); ok {
			ours[name] = guardSized(name, fn)
		}
	}
	for name, fn := range ours {
		if filters.Exists(name) {
			_ = filters.Replace(name, fn)
		} else {
			_ = filters.Register(name, fn)
		}
	}
	tests := exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests)
	all := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{}).Update(builtins.ControlStructures)
	allowed := map[string]parser.ControlStructureParser{}
	for name := range knownControlStructures {
		if unsupportedControlStructures[name] {
			continue
		}
		if p, ok := all.Get(name); ok {
			allowed[name] = p
		}
	}
	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	ctx.Set("range", rangeFunction)
	globals := map[string]bool{}
	for name := range knownGlobals {
		if ctx.Has(name) {
			globals[name] = true
		}
	}
	return &environment{
		cfg: cfg,
		env: &exec.Environment{
			Filters:           filters,
			Tests:             tests,
			ControlStructures: exec.NewControlStructureSet(allowed),
			Context:           ctx,
			Methods:           builtins.Methods,
		},
		globals: globals,
	}
}

// knownControlStructures lists gonja's tags; ControlStructureSet cannot be
// enumerated, so we name them.
var knownControlStructures = map[string]bool{
	"autoescape": true, "block": true, "extends": true, "filter": true,
	"for": true, "from": true, "if": true, "import": true, "include": true,
	"macro": true, "raw": true, "set": true, "with": true, "do": true,
	"break": true, "continue": true, "trans": true, "call": true,
}

// knownGlobals lists gonja's global functions and variables.
var knownGlobals = map[string]bool{
	"_": true, "cycler": true, "dict": true, "gettext": true, "joiner": true,
	"lipsum": true, "namespace": true, "ngettext": true, "range": true,
	"gonja": true,
}

// sourceLoader hands gonja the one template source; other names (include,
// import) are refused.
type sourceLoader struct {
	name string
	src  string
}

func (l *sourceLoader) Read(path string) (io.Reader, error) {
	if path != l.name {
		return nil, fmt.Errorf("template %q not available: playbook templates cannot load other files", path)
	}
	return strings.NewReader(l.src), nil
}

func (l *sourceLoader) Resolve(path string) (string, error) { return path, nil }

func (l *sourceLoader) Inherit(string) (loaders.Loader, error) { return l, nil }

// IsTemplateSource reports whether s contains template syntax ({{ or {%).
// Strings without it are constants.
func IsTemplateSource(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, "{%")
}

// CompileTemplate compiles src. A syntax error is returned as a
// *Diagnostic positioned at pos (adjusted into the source where possible).
//
// pos must be the position of the first character of the string content:
// after the opening quote of a quoted scalar, or the first character of
// the first content line of a block scalar. An error on the template's
// first line is reported at pos.Col plus its column; an error on a later
// line is reported at pos.Line plus the line offset with gonja's column
// within that line (for a block scalar, relative to the stripped
// indentation).
func CompileTemplate(src string, pos Pos) (t *Template, err error) {
	return compileTemplate(src, pos, nil)
}

// compileTemplate compiles src for a playbook whose limits are lim (nil:
// the defaults).
func compileTemplate(src string, pos Pos, lim *limitsRef) (t *Template, err error) {
	t = &Template{Source: src, Pos: pos, limits: lim}
	if !IsTemplateSource(src) {
		t.kind = kindConstant
		t.constant = src
		return t, nil
	}
	defer func() {
		if r := recover(); r != nil {
			t = nil
			err = &Diagnostic{Pos: pos, Message: fmt.Sprintf("template %q: internal template error: %v", snippet(src), r)}
		}
	}()
	e := sharedEnvironment()
	// Before rewriteConditionals, which recurses through conditionals too.
	if tok := tooDeeplyNested(src, e.cfg); tok != nil {
		return nil, nestingDiagnostic(src, pos, tok.Line, tok.Col)
	}
	parsed := rewriteConditionals(src)
	tpl, err := exec.NewTemplate("playbook", e.cfg, &sourceLoader{name: "playbook", src: parsed}, e.env)
	if err != nil {
		if parsed != src {
			// Report the error as the author wrote it, where possible.
			if _, origErr := exec.NewTemplate("playbook", e.cfg, &sourceLoader{name: "playbook", src: src}, e.env); origErr != nil {
				err = origErr
			}
		}
		return nil, syntaxDiagnostic(src, pos, err)
	}
	root := tpl.Root()
	w := guardTemplate(root, e.env)
	if w.tooDeep {
		return nil, nestingDiagnostic(src, pos, 0, 0)
	}
	if u := w.unknown; u != nil {
		return nil, &Diagnostic{Pos: adjustPos(pos, u.line, u.col), Message: fmt.Sprintf("template %q: unknown %s %q", snippet(src), u.what, u.name)}
	}
	t.needsBudget = w.needsBudget
	t.names = sortedKeys(w.names)
	t.iterAttrs = sortedKeys(w.iterAttrs)
	t.workloadAttrs = sortedKeys(w.workloadAttrs)
	t.taskRefs = w.taskRefs
	t.tpl = tpl
	t.kind = kindText
	t.keepText = keepsText(src)
	if out := singleOutput(root); out != nil {
		t.kind = kindNative
		t.out = out
		t.shareVars = !writesContextOrUsesGlobals(out, e.globals)
	}
	if !t.needsBudget {
		t.fast = compileFast(root, e, t.kind == kindNative)
	}
	return t, nil
}

// syntaxDiagnostic turns a gonja parse error into a Diagnostic positioned
// in the playbook.
func syntaxDiagnostic(src string, pos Pos, err error) *Diagnostic {
	var se *parser.SyntaxError
	if errors.As(err, &se) {
		p := adjustPos(pos, se.Line, se.Column)
		msg := "template syntax error: " + se.Message
		if se.Raw != "" {
			msg += fmt.Sprintf(" near %q", se.Raw)
		}
		return &Diagnostic{Pos: p, Message: msg}
	}
	// Other failures: strip gonja's "failed to parse template '<src>': "
	// prefix, which repeats the whole source.
	msg := err.Error()
	if i := strings.Index(msg, src+"': "); i >= 0 {
		msg = msg[i+len(src)+3:]
	}
	return &Diagnostic{Pos: pos, Message: "template syntax error: " + msg}
}

// adjustPos moves pos to line:col of the template source (both 1-based;
// zero means unknown).
func adjustPos(pos Pos, line, col int) Pos {
	if pos.Line == 0 || line <= 0 {
		return pos
	}
	p := pos
	if line > 1 {
		p.Line = pos.Line + line - 1
		p.Col = col
	} else if col > 0 {
		p.Col = pos.Col + col - 1
	}
	return p
}

// singleOutput returns the {{ }} node when the template is exactly one
// expression surrounded by whitespace.
func singleOutput(root *nodes.Template) *nodes.Output {
	if root == nil || root.Parent != nil {
		return nil
	}
	var out *nodes.Output
	for _, n := range root.Nodes {
		switch n := n.(type) {
		case *nodes.Data:
			if n.Data == nil || strings.TrimSpace(n.Data.Val) != "" {
				return nil
			}
		case *nodes.Output:
			if out != nil {
				return nil
			}
			out = n
		default:
			return nil
		}
	}
	return out
}

// Render renders the template against vars and returns the native value
// (for a single-expression template) or the value the rendered text reads
// as (see Template).
func (t *Template) Render(vars map[string]any) (v any, err error) {
	v, err = t.render(vars, true)
	if err == nil && t.kind == kindText && !t.keepText {
		if s, ok := v.(string); ok {
			if x, read := coerceText(s); read {
				v = x
			}
		}
	}
	return v, err
}

// render renders t, on the fast path when fast is set and the template
// has one; the tests turn it off to compare with gonja.
func (t *Template) render(vars map[string]any, fast bool) (v any, err error) {
	if t == nil {
		return nil, nil
	}
	if t.kind != kindConstant {
		if vars, err = t.resolveRefs(vars); err != nil {
			return nil, err
		}
	}
	if fast && t.fast != nil {
		if v, err := t.renderFast(vars); !errors.Is(err, errNotFast) {
			return v, err
		}
	}
	switch t.kind {
	case kindConstant:
		if t.constant == nil { // a Template built without CompileTemplate
			return t.Source, nil
		}
		return t.constant, nil
	case kindNative:
		return t.renderNative(vars)
	default:
		return t.renderText(vars)
	}
}

func (t *Template) fail(err error) error {
	return &RenderError{Pos: t.Pos, Snippet: snippet(t.Source), Err: tidyError(err)}
}

// filterCallDump matches gonja's %s rendering of a *nodes.FilterCall in
// its error messages, e.g. "&{<Token[Name] Val='int' ...> int [] map[]}".
var filterCallDump = regexp.MustCompile(`&\{<Token\[\w+\] Val='[^']*' Pos=\d+ Line=\d+ Col=\d+> (\w+) .*?\}: `)

// tokenDump matches gonja's rendering of a *tokens.Token.
var tokenDump = regexp.MustCompile(`<Token\[\w+\] Val='([^']*)' Pos=\d+ Line=\d+ Col=\d+>`)

// operatorDump matches gonja's report of a failed operator (which the
// parser turned into a filter, jinja.go), with the expression it dumps.
var operatorDump = regexp.MustCompile(`(?:filtered_expression\(.*?\): )?unable to evaluate filter (?:_[a-z]+|__cursorflow_[a-z]+): filter '[^']*': `)

// filterFailure matches gonja's report of a failed filter.
var filterFailure = regexp.MustCompile(`(?:filtered_expression\(.*?\): )?unable to evaluate filter (\w+): filter '\w+': `)

// tidyError rewrites gonja's messages into something a playbook author
// can read; the original error stays reachable through Unwrap.
func tidyError(err error) error {
	msg := err.Error()
	tidy := filterCallDump.ReplaceAllString(msg, "$1: ")
	tidy = tokenDump.ReplaceAllString(tidy, "'$1'")
	tidy = strings.ReplaceAll(tidy, "invalid call to filter ", "filter ")
	tidy = operatorDump.ReplaceAllString(tidy, "")
	tidy = filterFailure.ReplaceAllString(tidy, "filter $1: ")
	if tidy == msg {
		return err
	}
	return &tidyErr{msg: tidy, err: err}
}

type tidyErr struct {
	msg string
	err error
}

func (e *tidyErr) Error() string { return e.msg }
func (e *tidyErr) Unwrap() error { return e.err }

func (t *Template) renderText(vars map[string]any) (s any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, t.fail(fmt.Errorf("template panicked: %v", r))
		}
	}()
	if vars == nil {
		vars = map[string]any{}
	}
	bud := newBudget(t.limits.get())
	if t.needsBudget {
		// gonja copies vars into the render's context anyway; this copy
		// adds the budget without touching the caller's map.
		withBudget := make(map[string]any, len(vars)+1)
		for k, v := range vars {
			withBudget[k] = v
		}
		withBudget[budgetVar] = bud
		vars = withBudget
	}
	w := &limitedWriter{b: bud}
	w.Grow(len(t.Source))
	if err := t.tpl.Execute(w, exec.NewContext(vars)); err != nil {
		if bud.err != nil {
			err = bud.err
		}
		return nil, t.fail(err)
	}
	return w.String(), nil
}

func (t *Template) renderNative(vars map[string]any) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, t.fail(fmt.Errorf("template panicked: %v", r))
		}
	}()
	e := sharedEnvironment()
	if vars == nil {
		vars = map[string]any{}
	}
	var ctx *exec.Context
	if t.shareVars {
		// Read-only evaluation: the caller's map backs the context.
		ctx = exec.NewContext(vars)
		if t.needsBudget {
			ctx = ctx.Inherit()
		}
	} else {
		// Method calls on top-level names write back into the context,
		// and global functions live in the environment: copy vars into a
		// child of the global context.
		ctx = e.env.Context.Inherit().Update(exec.NewContext(vars))
	}
	var bud *budget
	if t.needsBudget {
		bud = newBudget(t.limits.get())
		ctx.Set(budgetVar, bud)
	}
	fail := func(err error) error {
		if bud != nil && bud.err != nil {
			err = bud.err
		}
		return t.fail(err)
	}
	ev := &exec.Evaluator{
		Config: e.cfg,
		Environment: &exec.Environment{
			Filters:           e.env.Filters,
			Tests:             e.env.Tests,
			ControlStructures: e.env.ControlStructures,
			Context:           ctx,
			Methods:           e.env.Methods,
		},
	}
	var val *exec.Value
	out := t.out
	if out.Condition != nil {
		cond := ev.Eval(out.Condition)
		if cond.IsError() {
			return nil, fail(evalError(cond))
		}
		switch {
		case cond.IsTrue():
			val = ev.Eval(out.Expression)
		case out.Alternative != nil:
			val = ev.Eval(out.Alternative)
		default:
			return nil, nil
		}
	} else {
		val = ev.Eval(out.Expression)
	}
	if val.IsError() {
		return nil, fail(evalError(val))
	}
	plain, err := toPlain(val)
	if err != nil {
		return nil, fail(err)
	}
	return plain, nil
}

func evalError(v *exec.Value) error {
	if err, ok := v.Interface().(error); ok {
		return err
	}
	return errors.New(v.String())
}

// RenderString renders the template and formats the result as a string
// (maps and lists as JSON, nil as "").
//
// Scalars follow Jinja's str(): true renders as "True", 1.0 as "1.0".
// Maps and lists render as JSON with sorted keys (the tojson format), not
// as Python reprs, because the string usually feeds a SQL statement, an
// HTTP body or a log line.
func (t *Template) RenderString(vars map[string]any) (string, error) {
	// The text itself, not the value NoETL would read it as.
	v, err := t.render(vars, true)
	if err != nil {
		return "", err
	}
	return formatString(v)
}

// formatString formats a plain value as RenderString documents.
func formatString(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		if x {
			return "True", nil
		}
		return "False", nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return pyFloatString(x), nil
	case []any, map[string]any:
		return marshalJSON(x, 0)
	}
	return fmt.Sprint(v), nil
}

// Truthy renders the template and reports Jinja2 truthiness of the result
// ("false", "False", "0", "" and "none" strings count as false, as NoETL
// treats rendered guards). A nil template is true.
//
// String results are compared after trimming spaces and ignoring case, so
// "FALSE" and " none " are false too.
func (t *Template) Truthy(vars map[string]any) (bool, error) {
	if t == nil {
		return true, nil
	}
	v, err := t.Render(vars)
	if err != nil {
		return false, err
	}
	return truthy(v), nil
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "", "false", "0", "none":
			return false
		}
		return true
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Map, reflect.Array, reflect.String:
		return rv.Len() > 0
	}
	return true
}

// guardTemplate replaces arithmetic operators by filters: division and
// modulo with Python's semantics, and *, + and ~ checked against the
// render budget (see jinja.go, limits.go). It rewrites every attribute and
// item access X.a / X[k] in the parsed template into (X or []).a /
// (X or [])[k]. gonja fails on
// attribute access on None; an empty list instead yields "not found",
// which non-strict evaluation turns into undefined. For every other falsy
// X (0, "", {}, [], false) the lookup was already "not found", so only
// the None case changes. Set targets ({% set ns.x = ... %}) are left
// alone so assignments still reach the real object.
//
// The same walk checks that every filter and test the template names
// exists, so a typo fails when the playbook is parsed rather than when the
// step runs; it returns the first unknown name.
//
// It notes whether the template reads the render budget and which
// variable names it reads (see Refs).
func guardTemplate(root *nodes.Template, env *exec.Environment) *guardWalker {
	w := &guardWalker{seen: map[uintptr]bool{}, env: env, names: map[string]bool{}}
	w.walk(reflect.ValueOf(root), false)
	return w
}

type unknownName struct {
	what, name string
	line, col  int
}

type guardWalker struct {
	seen map[uintptr]bool
	// depth is how many nodes deep the walk is; past maxTemplateTree it
	// sets tooDeep and goes no deeper.
	depth       int
	tooDeep     bool
	env         *exec.Environment
	unknown     *unknownName
	needsBudget bool
	names       map[string]bool
	// iterAttrs are the attributes read of iter ({{ iter.job.id }}: job).
	iterAttrs map[string]bool
	// workloadAttrs are the attributes read of workload.
	workloadAttrs map[string]bool
	// resultsOf holds the X.results nodes seen, with X; taskRefs the
	// X.results.T read ({{ fetch_page.results.check.more }}: fetch_page,
	// check).
	resultsOf map[*nodes.GetAttribute]string
	taskRefs  [][2]string
}

func (w *guardWalker) noteUnknown(what, name string, at *tokens.Token) {
	if w.unknown != nil {
		return
	}
	u := &unknownName{what: what, name: name}
	if at != nil {
		u.line, u.col = at.Line, at.Col
	}
	w.unknown = u
}

const gonjaPkg = "github.com/nikolalohinski/gonja/v2/"

var (
	typeName         = reflect.TypeFor[*nodes.Name]()
	typeGetAttribute = reflect.TypeFor[*nodes.GetAttribute]()
	typeGetItem      = reflect.TypeFor[*nodes.GetItem]()
	typeFilterCall   = reflect.TypeFor[*nodes.FilterCall]()
	typeTestCall     = reflect.TypeFor[*nodes.TestCall]()
	typeToken        = reflect.TypeFor[tokens.Token]()
)

func isGonjaType(t reflect.Type) bool {
	return strings.HasPrefix(t.PkgPath(), gonjaPkg) && t != typeToken
}

// walk visits v's nodes depth first. Fields of gonja's control structures
// are often unexported; reflection may read them, and the nodes we
// rewrite are reached through pointers whose own fields are exported.
func (w *guardWalker) walk(v reflect.Value, setTarget bool) {
	switch v.Kind() {
	case reflect.Interface:
		if !v.IsNil() {
			// Division and modulo get Python's semantics (jinja.go).
			replaceArithmetic(v)
			w.walk(v.Elem(), setTarget)
		}
	case reflect.Pointer:
		if v.IsNil() || !isGonjaType(v.Type().Elem()) {
			return
		}
		p := v.Pointer()
		if w.seen[p] || w.tooDeep {
			return
		}
		w.seen[p] = true
		if w.depth++; w.depth > maxTemplateTree {
			w.tooDeep = true
			return
		}
		w.walk(v.Elem(), false)
		w.depth--
		if setTarget {
			return
		}
		switch v.Type() {
		case typeFilterCall:
			n := reflect.NewAt(v.Type().Elem(), v.UnsafePointer()).Interface().(*nodes.FilterCall)
			if !w.env.Filters.Exists(n.Name) {
				w.noteUnknown("filter", n.Name, n.Token)
			}
			if slices.Contains(sizedFilters, n.Name) || n.Name == filterMul || n.Name == filterAdd || n.Name == filterConcat {
				w.needsBudget = true
			}
		case typeName:
			n := reflect.NewAt(v.Type().Elem(), v.UnsafePointer()).Interface().(*nodes.Name)
			if n.Name != nil {
				w.names[n.Name.Val] = true
				if n.Name.Val == "range" {
					w.needsBudget = true
				}
			}
		case typeTestCall:
			n := reflect.NewAt(v.Type().Elem(), v.UnsafePointer()).Interface().(*nodes.TestCall)
			if !w.env.Tests.Exists(n.Name) {
				w.noteUnknown("test", n.Name, n.Token)
			}
		case typeGetAttribute:
			n := reflect.NewAt(v.Type().Elem(), v.UnsafePointer()).Interface().(*nodes.GetAttribute)
			w.noteAttribute(n)
			n.Node = orEmptyList(n.Node)
		case typeGetItem:
			n := reflect.NewAt(v.Type().Elem(), v.UnsafePointer()).Interface().(*nodes.GetItem)
			n.Node = orEmptyList(n.Node)
		}
	case reflect.Struct:
		if !isGonjaType(v.Type()) {
			return
		}
		isSet := v.Type().Name() == "SetControlStructure"
		for i := range v.NumField() {
			w.walk(v.Field(i), isSet && v.Type().Field(i).Name == "target")
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			w.walk(v.Index(i), false)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			w.walk(it.Value(), false)
		}
	}
}

// noteAttribute records what the lints want of attribute access n, seen
// before its own rewrite and after its operand's (depth first).
func (w *guardWalker) noteAttribute(n *nodes.GetAttribute) {
	if n.Attribute == "" {
		return
	}
	switch x := n.Node.(type) {
	case *nodes.Name:
		switch {
		case x.Name == nil:
		case x.Name.Val == "iter":
			if w.iterAttrs == nil {
				w.iterAttrs = map[string]bool{}
			}
			w.iterAttrs[n.Attribute] = true
		case x.Name.Val == "workload":
			if w.workloadAttrs == nil {
				w.workloadAttrs = map[string]bool{}
			}
			w.workloadAttrs[n.Attribute] = true
		case n.Attribute == "results":
			if w.resultsOf == nil {
				w.resultsOf = map[*nodes.GetAttribute]string{}
			}
			w.resultsOf[n] = x.Name.Val
		}
	case *nodes.GetAttribute:
		if step, ok := w.resultsOf[x]; ok {
			w.taskRefs = append(w.taskRefs, [2]string{step, n.Attribute})
		}
	}
}

func orEmptyList(n nodes.Node) nodes.Node {
	if n == nil {
		return nil
	}
	switch n.(type) {
	case *nodes.String, *nodes.List, *nodes.Dict, *nodes.Tuple, *nodes.Integer, *nodes.Float, *nodes.Bool:
		return n
	}
	at := tokens.Token{Val: "[]"}
	if p := n.Position(); p != nil {
		at.Line, at.Col, at.Pos = p.Line, p.Col, p.Pos
	}
	list := at
	list.Type = tokens.LeftBracket
	or := at
	or.Type, or.Val = tokens.Or, "or"
	return &nodes.BinaryExpression{
		Left:     n,
		Right:    &nodes.List{Location: &list},
		Operator: &nodes.BinOperator{Token: &or},
	}
}

// writesContextOrUsesGlobals reports whether evaluating out may call a
// method on a top-level name (gonja then writes the name back into the
// context) or reads one of gonja's global functions.
func writesContextOrUsesGlobals(out *nodes.Output, globals map[string]bool) bool {
	found := false
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if found {
			return
		}
		switch v.Kind() {
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Pointer:
			if v.IsNil() || !isGonjaType(v.Type().Elem()) || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			switch n := reflect.NewAt(v.Type().Elem(), v.UnsafePointer()).Interface().(type) {
			case *nodes.Call:
				found = true
				return
			case *nodes.Name:
				if n.Name != nil && globals[n.Name.Val] {
					found = true
					return
				}
			}
			walk(v.Elem())
		case reflect.Struct:
			if !isGonjaType(v.Type()) {
				return
			}
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				walk(it.Value())
			}
		}
	}
	walk(reflect.ValueOf(out))
	return found
}
