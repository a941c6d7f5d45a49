package dsl

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cursorflow/cursorflow/internal/sqlquote"
)

// corpusTemplates returns every template string of the NoETL corpus, the
// examples' and the tests' playbooks, the Jinja2 differential cases and
// the bench program's row templates, deduplicated and sorted.
func corpusTemplates(t *testing.T) []string {
	t.Helper()
	root := moduleRoot(t)
	var files []string
	for _, dir := range []string{
		filepath.Join(root, "..", "shared", "noetl-playbooks"),
		filepath.Join(root, "examples", "playbooks"),
		filepath.Join(root, "dsl", "testdata"),
		filepath.Join(root, "engine", "testdata"),
	} {
		if dirExists(dir) {
			files = append(files, corpusFiles(t, dir)...)
		} else if strings.Contains(dir, "noetl-playbooks") {
			corpusDir(t) // skips, or fails under CI
		}
	}
	seen := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil {
			return
		}
		if n.Kind == yaml.ScalarNode && IsTemplateSource(n.Value) {
			seen[n.Value] = true
		}
		for _, c := range n.Content {
			walk(c)
		}
		walk(n.Alias)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(src, &doc); err != nil {
			continue // the corpus's deliberately broken playbooks
		}
		walk(&doc)
	}
	var cases struct {
		Cases []struct {
			Template string `json:"template"`
		} `json:"cases"`
	}
	readJSON(t, "testdata/jinja2/cases.json", &cases)
	for _, c := range cases.Cases {
		seen[c.Template] = true
	}
	for _, s := range []string{"{{ iter.job.id }}", "{{ iter.job | tojson | sql_literal }}", saveRecordSQL} {
		seen[s] = true
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// leafValues are the values the differential test puts at every path a
// template reads: numbers of both kinds (1.0, large, tiny, negative
// zero), strings with quotes, unicode, escapes and numbers in them, nil,
// booleans, maps and lists (empty too).
var leafValues = []any{
	int64(42), int64(-7), int64(0), 7, 1.0, 2.5, math.Copysign(0, -1), 1e20, 1e-7, 123456789012345678.0, 0.1 + 0.2,
	"plain", `it's a "quote" ünïcödé ✓ \ back`, "", "  12  ", "3.7", "0x1f", "line\nbreak\ttab", "NULL",
	nil, true, false,
	map[string]any{"a": int64(1), "b": "x'y", "c": []any{1.5, nil}, "id": int64(9)},
	[]any{int64(1), "two", 3.0, map[string]any{"k": "v"}},
	[]any{}, map[string]any{},
}

// fastPaths lists the variable paths an expression reads: steps are
// names (string) and list indexes (int).
func fastPaths(e fastExpr) [][]any {
	switch e := e.(type) {
	case fastName:
		return [][]any{{e.name}}
	case fastOrEmpty:
		return fastPaths(e.x)
	case fastAttr:
		return extend(fastPaths(e.x), e.name)
	case fastIndex:
		var out [][]any
		if lit, ok := e.index.(fastLit); ok {
			out = extend(fastPaths(e.x), lit.v)
		} else {
			out = append(fastPaths(e.x), fastPaths(e.index)...)
		}
		return out
	case *fastDirect:
		return fastPaths(e.in)
	case *fastFilter:
		out := fastPaths(e.in)
		for _, a := range e.args {
			out = append(out, fastPaths(a)...)
		}
		for _, a := range e.kwargs {
			out = append(out, fastPaths(a)...)
		}
		return out
	}
	return nil
}

func extend(paths [][]any, step any) [][]any {
	if len(paths) == 0 {
		return nil
	}
	// The accessed path is the first one (the expression's own); the
	// others are arguments read along the way.
	p := append(append([]any{}, paths[0]...), step)
	return append([][]any{p}, paths[1:]...)
}

// setLeaf stores leaf at path in scope, building maps and lists on the way.
func setLeaf(scope map[string]any, path []any, leaf any) {
	var cur any = scope
	for i, step := range path {
		last := i == len(path)-1
		next := func(old any) any {
			if last {
				return leaf
			}
			if _, isIdx := path[i+1].(int); isIdx {
				if l, ok := old.([]any); ok {
					return l
				}
				return []any{}
			}
			if m, ok := old.(map[string]any); ok {
				return m
			}
			return map[string]any{}
		}
		switch c := cur.(type) {
		case map[string]any:
			k, ok := step.(string)
			if !ok {
				return
			}
			c[k] = next(c[k])
			cur = c[k]
		case []any:
			idx, ok := step.(int)
			if !ok || idx < -3 || idx > 8 {
				return
			}
			if idx < 0 {
				idx += 4
			}
			for len(c) <= max(idx, 3) {
				c = append(c, nil)
			}
			// Lists are built fresh per scope, so growing in place is fine
			// once the parent points to the grown list.
			c[idx] = next(c[idx])
			setParent(scope, path[:i], c)
			cur = c[idx]
		default:
			return
		}
	}
}

// setParent stores list at path (a prefix of a path setLeaf walks).
func setParent(scope map[string]any, path []any, list []any) {
	var cur any = scope
	for i, step := range path {
		last := i == len(path)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[step.(string)] = list
				return
			}
			cur = c[step.(string)]
		case []any:
			idx := step.(int)
			if idx < 0 {
				idx += 4
			}
			if last {
				c[idx] = list
				return
			}
			cur = c[idx]
		}
	}
}

// scopesFor builds the scopes a template is rendered against: every
// leaf value at every path, mixes of them, and missing keys at each level.
func scopesFor(paths [][]any) []map[string]any {
	var out []map[string]any
	out = append(out, nil, map[string]any{})
	for _, v := range leafValues {
		s := map[string]any{}
		for _, p := range paths {
			setLeaf(s, p, copyPlain(v))
		}
		out = append(out, s)
	}
	for k := range leafValues {
		s := map[string]any{}
		for i, p := range paths {
			setLeaf(s, p, copyPlain(leafValues[(k+i*7)%len(leafValues)]))
		}
		out = append(out, s)
	}
	// Missing keys: each path cut short, its parent present and empty.
	for depth := 1; depth <= 4; depth++ {
		s := map[string]any{}
		for _, p := range paths {
			if len(p) > depth {
				setLeaf(s, p[:depth], map[string]any{})
			}
		}
		out = append(out, s)
	}
	return out
}

func sameRender(a, b any) bool {
	if fa, ok := a.(float64); ok {
		if fb, ok := b.(float64); ok && math.IsNaN(fa) && math.IsNaN(fb) {
			return true
		}
	}
	return reflect.DeepEqual(a, b)
}

// TestFastPathDifferential renders every template of the corpus on the
// fast path and with gonja against scopes that exercise what it reads,
// and requires the same value (type included) or the same error.
func TestFastPathDifferential(t *testing.T) {
	t.Parallel()
	templates := corpusTemplates(t)
	fast, renders, onFast := 0, 0, 0
	reasons := map[string]int{}
	for _, src := range templates {
		tpl, err := CompileTemplate(src, Pos{File: "c.yaml", Line: 1, Col: 1})
		if err != nil {
			continue // a template the corpus gets wrong on purpose
		}
		if tpl.kind == kindConstant {
			continue
		}
		if tpl.fast == nil {
			reasons[fallbackReason(tpl)]++
			continue
		}
		fast++
		var paths [][]any
		for _, p := range tpl.fast.pieces {
			if p.expr != nil {
				paths = append(paths, fastPaths(p.expr)...)
			}
		}
		for i, vars := range scopesFor(paths) {
			want, wantErr := tpl.render(vars, false)
			got, gotErr := tpl.render(vars, true)
			renders++
			if v, err := tpl.renderFast(vars); err == nil || !strings.Contains(err.Error(), errNotFast.Error()) {
				onFast++
				_ = v
			}
			if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
				t.Errorf("%q scope %d %v:\n fast  error %v\n gonja error %v", src, i, vars, gotErr, wantErr)
				continue
			}
			if !sameRender(got, want) {
				t.Errorf("%q scope %d %v:\n fast  %#v\n gonja %#v", src, i, vars, got, want)
			}
		}
	}
	t.Logf("%d templates, %d on the fast path, %d renders compared (%d rendered natively); fallbacks: %v", len(templates), fast, renders, onFast, reasons)
	if fast == 0 {
		t.Fatal("no template compiled for the fast path")
	}
}

// fallbackReason names why a template is rendered by gonja.
func fallbackReason(tpl *Template) string {
	if tpl.needsBudget {
		return "budget"
	}
	_, reason := explainFast(tpl.tpl.Root(), sharedEnvironment(), tpl.kind == kindNative)
	return reason
}

func TestFastPathCompiles(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"{{ iter.job.id }}",
		"{{ iter.job | tojson | sql_literal }}",
		"id={{ iter.job.id }} name={{ workload.x['y'] | default('n') | upper }}",
		"{{ rows[0].id | int }}",
		"{# comment #}{{- a -}}  b",
	} {
		tpl := compile(t, src)
		if tpl.fast == nil {
			t.Errorf("%q: not on the fast path", src)
		}
	}
	for _, src := range []string{
		"{{ a + b }}", "{{ a if b else c }}", "{% for x in xs %}{{ x }}{% endfor %}", "{{ a == 1 }}",
		"{{ range(3) }}", "{{ xs | join(',') }}", "{{ a is defined }}", "{{ [1, 2] }}",
	} {
		if tpl := compile(t, src); tpl.fast != nil {
			t.Errorf("%q: on the fast path", src)
		}
	}
}

func TestFastPathValues(t *testing.T) {
	t.Parallel()
	vars := map[string]any{
		"iter": map[string]any{"job": map[string]any{"id": int64(7), "name": "it's"}, "n": 1.0},
		"xs":   []any{int64(1), int64(2), int64(3)},
	}
	for src, want := range map[string]any{
		"{{ iter.job.id }}":                      int64(7),
		"{{ iter.n }}":                           1.0,
		"n={{ iter.n }}":                         "n=1.0",
		"{{ iter.job | tojson | sql_literal }}":  `'{"id": 7, "name": "it''s"}'`,
		"{{ iter.missing.deeper }}":              nil,
		"{{ xs[-1] }}":                           int64(3),
		"{{ xs[-3] }}":                           nil, // gonja finds x[-n] only for n < len(x)
		"{{ iter.job.name | upper }}!":           "IT'S!",
		"{{ iter.job.id | string | length }}":    int64(1),
		"{{ iter['job']['id'] | float }}":        7.0,
		"{{ nothing | default(iter.job.name) }}": "it's",
	} {
		tpl := compile(t, src)
		if tpl.fast == nil {
			t.Errorf("%q: not on the fast path", src)
			continue
		}
		got, err := tpl.renderFast(vars)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q = %#v, %v; want %#v", src, got, err, want)
		}
		if g, err := tpl.render(vars, false); err != nil || !reflect.DeepEqual(g, want) {
			t.Errorf("%q with gonja = %#v, %v; want %#v", src, g, err, want)
		}
	}
}

func TestFastPathFallsBack(t *testing.T) {
	t.Parallel()
	// Each of these is left to gonja at render time.
	for src, vars := range map[string]map[string]any{
		"{{ s[0] }}":                {"s": "héllo"},                          // gonja indexes bytes
		"{{ m[0] }}":                {"m": map[string]any{"a": int64(1)}},    // gonja errors
		"{{ x | sql_ident }}":       {"x": nil},                              // the filter errors
		"{{ x.y }}":                 {"x": struct{ y int }{1}},               // a struct
		"{{ x }}":                   {"x": fmt.Errorf("boom")},               // an error value
		"{{ x | int }} and {{ y }}": {"x": "1", "y": map[int]string{1: "a"}}, // a typed map (output only: fine)
	} {
		tpl := compile(t, src)
		if tpl.fast == nil {
			t.Fatalf("%q: not on the fast path", src)
		}
		want, wantErr := tpl.render(vars, false)
		got, gotErr := tpl.Render(vars)
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %#v, %v; gonja %#v, %v", src, got, gotErr, want, wantErr)
		}
	}
}

func TestFastPathLimits(t *testing.T) {
	t.Parallel()
	p, err := Parse("l.yaml", []byte("workflow:\n- step: start\n  tool: {kind: noop, q: 'x{{ s }}y'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.SetLimits(Limits{MaxBytes: 8})
	tpl := p.Step("start").Tool[0].Config["q"].Template()
	if tpl == nil || tpl.fast == nil {
		t.Fatal("not on the fast path")
	}
	if v, err := tpl.Render(map[string]any{"s": "12345"}); err != nil || v != "x12345y" {
		t.Fatalf("= %v, %v", v, err)
	}
	_, err = tpl.Render(map[string]any{"s": "123456789"})
	if err == nil || !strings.Contains(err.Error(), "render limit") {
		t.Fatalf("err = %v, want the output limit", err)
	}
}

// `x | tojson | sql_literal` writes its literal straight into the text
// (appendTo): what gonja renders, for every value and dialect, the
// backslash case's E'...' and text the output limit refuses included.
func TestToJSONSQLLiteralAppends(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"{{ x | tojson | sql_literal }}", "a {{ x | to_json | sql_literal }}::jsonb {{ x | tojson | sql_literal }} z"} {
		tpl := compile(t, src)
		if tpl.fast == nil {
			t.Fatalf("%q: not on the fast path", src)
		}
		for _, p := range tpl.fast.pieces {
			if d, ok := p.expr.(*fastDirect); p.expr != nil && (!ok || d.json == nil) {
				t.Fatalf("%q: %T is not appended", src, p.expr)
			}
		}
		values := append([]any{
			[]any{map[string]any{"id": int64(1), "payload": map[string]any{"n": int64(1), "name": "job 1"}}},
			map[string]any{"k": `back\slash 'q'`, "e": "ünï \u2028 \x00 \xff"},
			struct{ A int }{1}, // tojson leaves it to gonja
		}, leafValues...)
		for _, x := range values {
			for _, dialect := range []any{nil, sqlquote.Postgres, sqlquote.MySQL, sqlquote.SQLite} {
				vars := map[string]any{"x": x}
				if dialect != nil {
					vars[SQLDialectVar] = dialect
				}
				want, wantErr := tpl.render(vars, false)
				got, gotErr := tpl.render(vars, true)
				if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !reflect.DeepEqual(got, want) {
					t.Errorf("%q x=%#v dialect %v: %#v, %v; gonja %#v, %v", src, x, dialect, got, gotErr, want, wantErr)
				}
			}
		}
	}
	p, err := Parse("l.yaml", []byte("workflow:\n- step: start\n  tool: {kind: noop, q: 'x{{ s | tojson | sql_literal }}y'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.SetLimits(Limits{MaxBytes: 12})
	tpl := p.Step("start").Tool[0].Config["q"].Template()
	if v, err := tpl.Render(map[string]any{"s": "1234"}); err != nil || v != `x'"1234"'y` {
		t.Fatalf("= %v, %v", v, err)
	}
	if _, err = tpl.Render(map[string]any{"s": "12345678"}); err == nil || !strings.Contains(err.Error(), "render limit") {
		t.Fatalf("err = %v, want the output limit", err)
	}
}

// TestToJSONEscapes pins tojson's output for the characters it escapes,
// the runs of plain bytes between them, map keys in order (small maps and
// large) and integers of many digits.
func TestToJSONEscapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"", `""`},
		{"plain run", `"plain run"`},
		{`q"b\s`, `"q\"b\\s"`},
		{"a\nb\rc\td\be\ff", `"a\nb\rc\td\be\ff"`},
		{"\x00\x1f\x7f~ ", `"\u0000\u001f\u007f~ "`},
		{"ünï ✓\u2028\u2029end", "\"ünï ✓\\u2028\\u2029end\""},
		{"bad\xffbyte", `"bad\ufffdbyte"`},
		{"tail\"", `"tail\""`},
		{int64(-1234567890123), `-1234567890123`},
		{map[string]any{"z": int64(100), "a": "x", "m": []any{int64(7), nil}}, `{"a": "x", "m": [7, null], "z": 100}`},
		{map[string]any{"k9": 1.5, "k1": true, "k5": false, "k3": nil, "k2": "", "k8": int64(8), "k4": "4", "k6": "6", "k7": "7"},
			`{"k1": true, "k2": "", "k3": null, "k4": "4", "k5": false, "k6": "6", "k7": "7", "k8": 8, "k9": 1.5}`},
	} {
		got, err := marshalJSON(tc.in, 0)
		if err != nil || got != tc.want {
			t.Errorf("tojson(%#v) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// tojson of a frame's rows (alike, the first often the shortest) grows
// its buffer once, sized on the first row: it allocates about the size of
// its result. Sized on a guess of 48 bytes a row, it grew again by
// doubling when the rows were longer: over twice the size of its result.
func TestToJSONRowsGrowOnce(t *testing.T) {
	var rows []any
	for i := 1; i <= 100; i++ {
		rows = append(rows, map[string]any{"id": int64(i), "payload": map[string]any{"n": int64(i), "name": fmt.Sprint("job ", i)}})
	}
	out, err := marshalJSON(rows, 0)
	if err != nil || !strings.HasPrefix(out, `[{"id": 1, "payload": {"n": 1, "name": "job 1"}}, {"id": 2, `) ||
		!strings.HasSuffix(out, `{"id": 100, "payload": {"n": 100, "name": "job 100"}}]`) {
		t.Fatalf("tojson = %.80s..., %v", out, err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		_, _ = marshalJSON(rows, 0)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > uint64(len(out))*3/2 {
		t.Errorf("tojson of %d rows (%d bytes) allocates %d bytes", len(rows), len(out), per)
	}
}
