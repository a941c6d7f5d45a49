package dsl

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// tmplVars is a render context shaped like the engine's.
func tmplVars() map[string]any {
	return map[string]any{
		"execution_id": "exec-1",
		"none":         nil,
		"workload": map[string]any{
			"numbers":  []any{int64(1), int64(2), int64(3)},
			"name":     "demo",
			"n":        int64(5),
			"f":        2.5,
			"plain":    3, // a Go int, normalised to int64 on the way out
			"numeric":  "42",
			"nested":   map[string]any{"a": map[string]any{"b": "deep"}},
			"endpoint": map[string]any{"path": "/users", "page_size": int64(50)},
		},
		"ctx":  map[string]any{"has_more": true, "current_page": "3", "empty": ""},
		"vars": map[string]any{},
		"iter": map[string]any{
			"_index":    int64(0),
			"data_type": "assessments",
			"patient":   map[string]any{"patient_id": "12", "facility_mapping_id": int64(7)},
			"payload":   map[string]any{"z": 1.0, "a": "it's <b>&", "list": []any{int64(1), nil, true}},
		},
		"output": map[string]any{
			"status": "error",
			"http":   map[string]any{"status": int64(503)},
			"data":   map[string]any{"rows": []any{}, "row_count": int64(0)},
			"error":  map[string]any{"retryable": true, "kind": "rate_limit"},
		},
		"event": map[string]any{"name": "loop.done"},
	}
}

func compile(t *testing.T, src string) *Template {
	t.Helper()
	tp, err := CompileTemplate(src, Pos{File: "p.yaml", Line: 1, Col: 1})
	if err != nil {
		t.Fatalf("CompileTemplate(%q): %v", src, err)
	}
	return tp
}

func render(t *testing.T, src string, vars map[string]any) any {
	t.Helper()
	v, err := compile(t, src).Render(vars)
	if err != nil {
		t.Fatalf("Render(%q): %v", src, err)
	}
	return v
}

func TestRenderNative(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want any
	}{
		{"{{ workload.numbers }}", []any{int64(1), int64(2), int64(3)}},
		{"  {{ workload.numbers }}\n", []any{int64(1), int64(2), int64(3)}},
		{"{{ workload.plain }}", int64(3)},
		{"{{ workload.n }}", int64(5)},
		{"{{ workload.f }}", 2.5},
		{"{{ workload.name }}", "demo"},
		{"{{ workload.numeric }}", "42"}, // strings stay strings
		{"{{ 42 }}", int64(42)},
		{"{{ 1.0 }}", 1.0},
		{"{{ True }}", true},
		{"{{ false }}", false},
		{"{{ None }}", nil},
		{"{{ none }}", nil},
		{"{{ workload.nested }}", map[string]any{"a": map[string]any{"b": "deep"}}},
		{"{{ workload.nested.a.b }}", "deep"},
		{"{{ workload['nested']['a'].b }}", "deep"},
		{"{{ workload.numbers[1] }}", int64(2)},
		{"{{ workload.numbers[-1] }}", int64(3)},
		{"{{ workload.numbers[1:] }}", []any{int64(2), int64(3)}},
		{"{{ {'a': 1, 'b': [1, 2.5, 'x']} }}", map[string]any{"a": int64(1), "b": []any{int64(1), 2.5, "x"}}},
		{"{{ [workload.n, ctx.has_more] }}", []any{int64(5), true}},
		{"{{ iter.patient.patient_id | int }}", int64(12)},
		{"{{ (ctx.current_page | int) + 1 }}", int64(4)},
		{"{{ workload.f > workload.n }}", false},
		{"{{ workload.f < workload.n }}", true},
		{"{{ workload.n == 5.0 }}", true},
		{"{{ workload.numeric | int == 42 }}", true},
		{"{{ workload.name == 'demo' }}", true},
		{"{{ workload.name != \"demo\" }}", false},
		{"{{ 2 in workload.numbers }}", true},
		{"{{ 'em' in workload.name }}", true},
		{"{{ 'a' in workload.nested }}", true},
		{"{{ output.http.status in [500, 502, 503] }}", true},
		{"{{ output.status == 'error' and output.http.status in [429, 500] }}", false},
		{"{{ output.status == 'error' and output.error.retryable }}", true},
		{"{{ not ctx.has_more }}", false},
		{"{{ ctx.has_more == true }}", true},
		{"{{ ctx.has_more != true }}", false},
		{"{{ ctx.empty or 'fallback' }}", "fallback"},
		{"{{ 'yes' if ctx.has_more else 'no' }}", "yes"},
		{"{{ 'yes' if ctx.empty else 'no' }}", "no"},
		{"{{ 'only' if ctx.empty }}", nil},
		{"{{ output.data.rows[0].facility_id if (output.data.row_count | default(0) | int) > 0 else (ctx.facility_id | default(0)) }}", int64(0)},
		{"{{ workload.name ~ '-' ~ workload.n }}", "demo-5"},
		{"{{ 7 // 2 }}", int64(3)},
		{"{{ 7 / 2 }}", 3.5},
		{"{{ 7 % 4 }}", int64(3)},
		{"{{ workload.get('name') }}", "demo"},
		{"{{ workload.get('missing', 'dflt') }}", "dflt"},
		{"{{ workload.nested.keys() | list }}", []any{"a"}},
		{"{{ range(3) | list }}", []any{int64(0), int64(1), int64(2)}},
		{"{{ event.name == 'loop.done' }}", true},
		{"{{ iter.data_type is string }}", true},
		{"{{ missing is defined }}", false},
		{"{{ workload is defined }}", true},
		{"{{ none is none }}", true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got := render(t, tt.src, tmplVars())
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v (%T), want %#v (%T)", got, got, tt.want, tt.want)
			}
		})
	}
}

func TestRenderText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want string
	}{
		{"id={{ iter.patient.patient_id | int }}", "id=12"},
		{"{{ workload.n }}{{ workload.n }}", "55"},
		{"x {{ True }} {{ none }} {{ 1.5 }} {{ 2.0 }}", "x True  1.5 2.0"},
		{"{{ workload.numbers }} list", "[1, 2, 3] list"},
		{"a {{ missing.x.y }} b", "a  b"},
		{"{% if iter.data_type == 'assessments' %}A{% elif iter.data_type == 'x' %}X{% else %}B{% endif %}", "A"},
		{"{% for n in workload.numbers %}{{ n }},{% endfor %}", "1,2,3,"},
		{"{% for n in missing %}{{ n }}{% else %}empty{% endfor %}", "empty"},
		{"{% set total = workload.n + 1 %}{{ total }}", "6"},
		{"line\n{{ 1 }}\n", "line\n1"}, // Jinja drops one trailing newline
		{"{# comment #}{{ 1 }}", "1"},
		{"'{{ iter.payload | tojson | replace(\"'\", \"''\") }}'::jsonb", `'{"a": "it''s <b>&", "list": [1, null, true], "z": 1.0}'::jsonb`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got, err := compile(t, tt.src).RenderString(tmplVars())
			if err != nil || got != tt.want {
				t.Fatalf("got %#v (%v), want %#v", got, err, tt.want)
			}
		})
	}
}

func TestConstantTemplate(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "SELECT 1\n", "{ not a template }", "50% off { }", "}} {#"} {
		tp := compile(t, src)
		got, err := tp.Render(nil)
		if err != nil || got != src {
			t.Fatalf("Render(%q) = %#v, %v; want the source", src, got, err)
		}
	}
	// A Template built by hand (zero kind) is a constant too.
	if got, _ := (&Template{Source: "hand"}).Render(nil); got != "hand" {
		t.Fatalf("hand-built template rendered %#v", got)
	}
}

func TestUndefinedHandling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want any
	}{
		{"{{ missing }}", nil},
		{"{{ missing | default(0) }}", int64(0)},
		{"{{ missing.a.b.c }}", nil},
		{"{{ none.attr }}", nil},
		{"{{ none['key'] }}", nil},
		{"{{ missing[0].x }}", nil},
		{"{{ output.data.rows[0].x }}", nil},
		{"{{ output.data.rows[0].x | default('d') }}", "d"},
		{"{{ output.data.rows[5] }}", nil},
		{"{{ workload.nested.zzz.yyy }}", nil},
		{"{{ workload.numbers[10].x }}", nil},
		{"{{ (output.data.rows | default(output.data) | first).mds_complete | string | lower }}", ""},
		{"{{ (output.data.rows[0].data_count | default(0) | int) < (workload.n | int) }}", true},
		{"{{ missing.x == 'a' }}", false},
		{"{{ missing.x is defined }}", false},
		{"{{ missing | length }}", int64(0)},
		{"{{ missing.x | int }}", int64(0)},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got := render(t, tt.src, tmplVars())
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v (%T), want %#v", got, got, tt.want)
			}
		})
	}
	// nil vars behave as an empty context.
	if got, err := compile(t, "{{ a.b }}-{{ c }}").Render(nil); err != nil || got != "-" {
		t.Fatalf("nil vars: %#v, %v", got, err)
	}
}

func TestNativeResultIsOwned(t *testing.T) {
	t.Parallel()
	vars := tmplVars()
	got := render(t, "{{ workload.numbers }}", vars).([]any)
	got[0] = "changed"
	if vars["workload"].(map[string]any)["numbers"].([]any)[0] != int64(1) {
		t.Fatal("native result aliases the render variables")
	}
}

func TestRenderString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want string
	}{
		{"{{ workload.numbers }}", "[1, 2, 3]"},
		{"{{ workload.nested }}", `{"a": {"b": "deep"}}`},
		{"{{ none }}", ""},
		{"{{ missing.x }}", ""},
		{"{{ True }}", "True"},
		{"{{ 1 == 2 }}", "False"},
		{"{{ 3 }}", "3"},
		{"{{ 2.0 }}", "2.0"},
		{"{{ 1e20 }}", "1e+20"},
		{"{{ workload.name }}", "demo"},
		{"plain", "plain"},
		{"n={{ workload.n }}", "n=5"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got, err := compile(t, tt.src).RenderString(tmplVars())
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	var nilT *Template
	if s, err := nilT.RenderString(nil); s != "" || err != nil {
		t.Fatalf("nil template: %q, %v", s, err)
	}
}

func TestTruthy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		want bool
	}{
		{"{{ ctx.has_more }}", true},
		{"{{ not ctx.has_more }}", false},
		{"{{ missing }}", false},
		{"{{ none }}", false},
		{"{{ 0 }}", false},
		{"{{ 0.0 }}", false},
		{"{{ 2 }}", true},
		{"{{ [] }}", false},
		{"{{ [0] }}", true},
		{"{{ {} }}", false},
		{"{{ workload.nested }}", true},
		{"{{ '' }}", false},
		{"{{ 'x' }}", true},
		{"false", false},
		{"False", false},
		{"FALSE", false},
		{"0", false},
		{"none", false},
		{"None", false},
		{"", false},
		{" false ", false},
		{"true", true},
		{"yes", true},
		{"{{ ctx.has_more }} ", true},
		{"{{ 'False' }}", false},
		{"{% if ctx.has_more %}false{% else %}true{% endif %}", false},
		{"{{ output.status == 'error' and output.error.retryable }}", true},
		{"{{ (output.data.row_count | default(0) | int) == 0 }}", true},
		{"{{ iter.has_more | string | lower == 'true' }}", false},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got, err := compile(t, tt.src).Truthy(tmplVars())
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	var nilT *Template
	if ok, err := nilT.Truthy(nil); !ok || err != nil {
		t.Fatalf("nil template: %v, %v; want true", ok, err)
	}
}

func TestSyntaxErrors(t *testing.T) {
	t.Parallel()
	pos := Pos{File: "p.yaml", Line: 10, Col: 5}
	tests := []struct {
		src     string
		wantPos string
		wantMsg string
	}{
		{"{{ foo", "p.yaml:10:11", "'}}' expected"},
		{"{{ a b }}", "p.yaml:10:10", `near "b"`},
		{"ab\ncd {{ a +* }}", "p.yaml:11:10", `near "*"`},
		{"line1\nline2\n  {{ a b }}", "p.yaml:12:8", `near "b"`},
		{"{% if %}", "p.yaml:10:5", "template syntax error"},
		{"{% if x %}a", "p.yaml:10", "expected tag elif or else or endif"},
		{"{% endif %}", "p.yaml:10", "endif"},
		{"{% include 'other.sql' %}", "p.yaml:10", "include"},
		{"{{ a | nofilter }}", "p.yaml:10:12", `unknown filter "nofilter"`},
		{"{{ a is nosuchtest }}", "p.yaml:10:13", `unknown test "nosuchtest"`},
		{"{% for x in y %}{{ x | bogus }}{% endfor %}", "p.yaml:10", `unknown filter "bogus"`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			_, err := CompileTemplate(tt.src, pos)
			var d *Diagnostic
			if !errors.As(err, &d) {
				t.Fatalf("error %v (%T) is not a *Diagnostic", err, err)
			}
			if !strings.HasPrefix(d.Pos.String(), tt.wantPos) {
				t.Errorf("pos %s, want %s", d.Pos, tt.wantPos)
			}
			if !strings.Contains(d.Message, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", d.Message, tt.wantMsg)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src     string
		wantMsg string
	}{
		{"{{ workload.name | fromjson }}", "fromjson"},
		{"{{ 'abc' | b64decode }}", "b64decode"},
		{"{{ -'a' }}", "Negative sign"},
		{"x {{ workload.x.y() }}", "y"},
		{"{{ 5[0] }}", "index"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			tp, err := CompileTemplate(tt.src, Pos{File: "p.yaml", Line: 3, Col: 9})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tp.Render(tmplVars())
			var re *RenderError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T) is not a *RenderError", err, err)
			}
			if re.Pos.Line != 3 || re.Pos.Col != 9 {
				t.Errorf("pos %v", re.Pos)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "p.yaml:3:9: template ") || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message %q", msg)
			}
			if strings.Contains(msg, "<Token[") {
				t.Errorf("message leaks gonja internals: %q", msg)
			}
			// Callers add their own context by wrapping.
			wrapped := fmt.Errorf("step fetch field url: %w", err)
			if !errors.As(wrapped, &re) {
				t.Error("wrapped error lost the RenderError")
			}
		})
	}
	long := "{{ 5[0] }}" + strings.Repeat(" padding", 40)
	_, err := compile(t, long).Render(nil)
	var re *RenderError
	if !errors.As(err, &re) || len(re.Snippet) > snippetLimit {
		t.Fatalf("snippet not shortened: %v", err)
	}
}

func TestConcurrentRender(t *testing.T) {
	t.Parallel()
	native := compile(t, "{{ iter.patient.patient_id | int }}")
	text := compile(t, "{% if iter.ok %}id={{ iter.patient.patient_id }}{% endif %} {{ iter.payload | tojson }}")
	method := compile(t, "{{ iter.get('patient').patient_id }}") // writes back into its context
	shared := tmplVars()
	const goroutines, rounds = 16, 200
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				id := g*rounds + i
				vars := map[string]any{"iter": map[string]any{
					"ok":      true,
					"patient": map[string]any{"patient_id": fmt.Sprint(id)},
					"payload": map[string]any{"i": int64(id)},
				}}
				if v, err := native.Render(vars); err != nil || v != int64(id) {
					errs <- fmt.Errorf("native: %v, %v; want %d", v, err, id)
					return
				}
				want := fmt.Sprintf(`id=%d {"i": %d}`, id, id)
				if v, err := text.Render(vars); err != nil || v != want {
					errs <- fmt.Errorf("text: %v, %v; want %s", v, err, want)
					return
				}
				// Every goroutine shares one vars map here.
				if v, err := method.Render(shared); err != nil || v != "12" {
					errs <- fmt.Errorf("method: %v, %v", v, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !reflect.DeepEqual(shared, tmplVars()) {
		t.Error("rendering modified the shared vars")
	}
}

func TestRenderNeverPanics(t *testing.T) {
	t.Parallel()
	// Values gonja cannot handle must produce errors, not panics.
	vars := map[string]any{
		"fn":   func() {},
		"ch":   make(chan int),
		"m":    map[int]string{1: "a"},
		"st":   struct{ A int }{A: 1},
		"ptr":  (*int)(nil),
		"deep": []any{[]any{[]any{}}},
	}
	for _, src := range []string{"{{ fn }}", "{{ fn() }}", "{{ ch }}", "{{ m }}", "{{ m[1] }}", "{{ st.A }}", "{{ ptr }}", "{{ ptr.x }}", "{{ deep[0][0][0] }}", "{{ m | tojson }}", "{{ st | tojson }}", "x{{ fn }}"} {
		tp := compile(t, src)
		_, _ = tp.Render(vars) // must return, with or without an error
	}
}

func FuzzCompileTemplate(f *testing.F) {
	for _, s := range []string{
		"{{ a }}", "{{ a.b[0] | int }}", "{% if x %}y{% endif %}", "{{ 'x' if a else b }}",
		"{{ a | tojson | replace(\"'\", \"''\") }}", "{% for i in a %}{{ i }}{% endfor %}", "{{", "{%", "{{ {'a': [1, 2.5]} }}",
	} {
		f.Add(s)
	}
	vars := tmplVars()
	f.Fuzz(func(t *testing.T, src string) {
		tp, err := CompileTemplate(src, Pos{Line: 1, Col: 1})
		if err != nil {
			var d *Diagnostic
			if !errors.As(err, &d) {
				t.Fatalf("compile error %T is not a *Diagnostic", err)
			}
			return
		}
		_, _ = tp.Render(vars)
		_, _ = tp.Truthy(vars)
	})
}

func TestFilters(t *testing.T) {
	t.Parallel()
	vars := map[string]any{
		"s":     "Hello World",
		"pad":   "  x  ",
		"num":   "12",
		"numf":  "12.7",
		"hex":   "0x1A",
		"bad":   "abc",
		"f":     2.75,
		"neg":   int64(-4),
		"t":     true,
		"list":  []any{int64(3), int64(1), int64(2), int64(3)},
		"words": []any{"b", "a", "C"},
		"rows": []any{
			map[string]any{"id": int64(2), "name": "b", "ok": true},
			map[string]any{"id": int64(1), "name": "a", "ok": false},
		},
		"obj":  map[string]any{"b": int64(1), "a": "it's <x> & \"q\"", "c": []any{1.5, nil}},
		"json": `{"a": [1, 2.5, "x"], "b": null}`,
		"b64":  "aGVsbG8=",
		"none": nil,
	}
	tests := []struct {
		src  string
		want any
	}{
		// int
		{"{{ num | int }}", int64(12)},
		{"{{ numf | int }}", int64(12)},
		{"{{ f | int }}", int64(2)},
		{"{{ t | int }}", int64(1)},
		{"{{ bad | int }}", int64(0)},
		{"{{ bad | int(7) }}", int64(7)},
		{"{{ none | int }}", int64(0)},
		{"{{ missing | int }}", int64(0)},
		{"{{ ' 42 ' | int }}", int64(42)},
		{"{{ hex | int(0, 16) }}", int64(26)},
		{"{{ '-5' | int }}", int64(-5)},
		// float
		{"{{ num | float }}", 12.0},
		{"{{ numf | float }}", 12.7},
		{"{{ neg | float }}", -4.0},
		{"{{ t | float }}", 1.0},
		{"{{ bad | float }}", 0.0},
		{"{{ bad | float(1.5) }}", 1.5},
		// default / d
		{"{{ missing | default(5) }}", int64(5)},
		{"{{ none | default('x') }}", "x"},
		{"{{ missing | default }}", ""},
		{"{{ s | default('x') }}", "Hello World"},
		{"{{ '' | default('x') }}", ""},
		{"{{ '' | default('x', true) }}", "x"},
		{"{{ 0 | default('x', boolean=true) }}", "x"},
		{"{{ missing | d('y') }}", "y"},
		// tojson / to_json
		{"{{ obj | tojson }}", `{"a": "it's <x> & \"q\"", "b": 1, "c": [1.5, null]}`},
		{"{{ obj | to_json }}", `{"a": "it's <x> & \"q\"", "b": 1, "c": [1.5, null]}`},
		{"{{ list | tojson }}", `[3, 1, 2, 3]`},
		{"{{ s | tojson }}", `"Hello World"`},
		{"{{ none | tojson }}", `null`},
		{"{{ {'k': [1]} | tojson(indent=2) }}", "{\n  \"k\": [\n    1\n  ]\n}"},
		{"{{ obj | tojson | replace(\"'\", \"''\") }}", `{"a": "it''s <x> & \"q\"", "b": 1, "c": [1.5, null]}`},
		// fromjson / from_json
		{"{{ json | fromjson }}", map[string]any{"a": []any{int64(1), 2.5, "x"}, "b": nil}},
		{"{{ (json | from_json).a[1] }}", 2.5},
		{"{{ obj | fromjson }}", map[string]any{"b": int64(1), "a": "it's <x> & \"q\"", "c": []any{1.5, nil}}},
		{"{{ '' | fromjson }}", nil},
		// base64
		{"{{ 'hello' | b64encode }}", "aGVsbG8="},
		{"{{ b64 | b64decode }}", "hello"},
		{"{{ 'aGVsbG8' | b64decode }}", "hello"},
		// replace
		{"{{ s | replace('o', '0') }}", "Hell0 W0rld"},
		{"{{ s | replace('o', '0', 1) }}", "Hell0 World"},
		{"{{ 1234 | replace(2, 9) }}", "1934"},
		// lower / upper / trim / string
		{"{{ s | lower }}", "hello world"},
		{"{{ s | upper }}", "HELLO WORLD"},
		{"{{ t | string | lower }}", "true"},
		{"{{ pad | trim }}", "x"},
		{"{{ 'xxaxx' | trim('x') }}", "a"},
		{"{{ 12 | string }}", "12"},
		{"{{ 2.0 | string }}", "2.0"},
		{"{{ none | string }}", ""},
		{"{{ t | string }}", "True"},
		// first / last
		{"{{ list | first }}", int64(3)},
		{"{{ list | last }}", int64(3)},
		{"{{ s | first }}", "H"},
		{"{{ [] | first }}", nil},
		{"{{ missing | last }}", nil},
		{"{{ rows | first }}", map[string]any{"id": int64(2), "name": "b", "ok": true}},
		// length / count
		{"{{ list | length }}", int64(4)},
		{"{{ s | count }}", int64(11)},
		{"{{ obj | length }}", int64(3)},
		{"{{ missing | length }}", int64(0)},
		{"{{ 'héllo' | length }}", int64(5)},
		// gonja builtins playbooks rely on
		{"{{ list | join(',') }}", "3,1,2,3"},
		{"{{ rows | map(attribute='name') | join('|') }}", "b|a"},
		{"{{ s | list | length }}", int64(11)},
		{"{{ f | round }}", 3.0},
		{"{{ 2.345 | round(2) }}", 2.35},
		{"{{ neg | abs }}", int64(4)},
		{"{{ list | min }}", int64(1)},
		{"{{ list | max }}", int64(3)},
		{"{{ list | sum }}", int64(9)},
		{"{{ list | unique | list }}", []any{int64(3), int64(1), int64(2)}},
		{"{{ list | sort }}", []any{int64(1), int64(2), int64(3), int64(3)}},
		{"{{ words | sort }}", []any{"a", "b", "C"}},
		{"{{ rows | sort(attribute='id') | map(attribute='name') | list }}", []any{"a", "b"}},
		{"{{ list | select('odd') | list }}", []any{int64(3), int64(1), int64(3)}},
		{"{{ rows | selectattr('ok') | map(attribute='id') | list }}", []any{int64(2)}},
		{"{{ rows | rejectattr('ok') | map(attribute='id') | list }}", []any{int64(1)}},
		{"{{ obj.keys() | sort }}", []any{"a", "b", "c"}},
		{"{{ obj.get('b') }}", int64(1)},
		{"{{ obj | dictsort | first | first }}", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got := render(t, tt.src, vars)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v (%T), want %#v (%T)", got, got, tt.want, tt.want)
			}
		})
	}
}

func TestSQLFilters(t *testing.T) {
	t.Parallel()
	vars := map[string]any{
		"quote": "O'Brien", "bs": `C:\temp\'x`, "dollar": "$$; DROP TABLE t; $$", "uni": "naïve — 日本",
		"n": int64(-3), "f": 2.5, "t": true, "none": nil,
		"job": map[string]any{"name": "it's", "path": `a\b`}, "list": []any{int64(1), "x'y"},
		"col": `we"ird`,
	}
	tests := []struct{ src, want string }{
		{"{{ quote | sql_literal }}", `'O''Brien'`},
		{"{{ bs | sql_literal }}", `E'C:\\temp\\''x'`},
		{"{{ bs | sql_literal('sqlite') }}", `'C:\temp\''x'`},
		{"{{ bs | sql_literal(dialect='mysql') }}", `'C:\\temp\\''x'`},
		{"{{ dollar | sql_literal }}", `'$$; DROP TABLE t; $$'`},
		{"{{ uni | sql_literal }}", `'naïve — 日本'`},
		{"{{ n | sql_literal }}", `-3`},
		{"{{ f | sql_literal }}", `2.5`},
		{"{{ t | sql_literal }}", `TRUE`},
		{"{{ none | sql_literal }}", `NULL`},
		{"{{ missing | sql_literal }}", `NULL`},
		{"{{ job | sql_literal }}", `E'{"name": "it''s", "path": "a\\\\b"}'`},
		{"{{ job | tojson | sql_literal }}::jsonb", `E'{"name": "it''s", "path": "a\\\\b"}'::jsonb`},
		{"{{ list | sql_literal }}", `'[1, "x''y"]'`},
		{"SELECT {{ col | sql_ident }} FROM t", `SELECT "we""ird" FROM t`},
		{"{{ col | sql_ident('mysql') }}", "`we\"ird`"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			if got := render(t, tt.src, vars); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
	// SQLDialectVar sets the dialect of those without one, on the fast
	// path and through gonja alike; an explicit one still wins.
	mysql := map[string]any{SQLDialectVar: "mysql"}
	maps.Copy(mysql, vars)
	for src, want := range map[string]string{
		"{{ bs | sql_literal }}":                    `'C:\\temp\\''x'`,
		"{{ job.path | sql_literal }}":              `'a\\b'`,
		"{{ bs | upper | sql_literal }}":            `'C:\\TEMP\\''X'`,
		"SELECT {{ col | sql_ident }} FROM t":       "SELECT `we\"ird` FROM t",
		"{{ bs | sql_literal('postgres') }}":        `E'C:\\temp\\''x'`,
		"{{ col | sql_ident(dialect='postgres') }}": `"we""ird"`,
	} {
		if got := render(t, src, mysql); got != want {
			t.Errorf("%s with %s mysql: got %s, want %s", src, SQLDialectVar, got, want)
		}
	}
	for _, src := range []string{"{{ 'a\x00b' | sql_literal }}", "{{ '' | sql_ident }}", "{{ none | sql_ident }}", "{{ 'x' | sql_literal('oracle') }}"} {
		tpl, err := CompileTemplate(src, Pos{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tpl.Render(vars); err == nil {
			t.Errorf("%q rendered without an error", src)
		}
	}
}

// TestRenderLimits: templates that would take the engine's memory or time
// fail fast with ErrRenderLimit, and the guarded operators keep their
// values.
func TestRenderLimits(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ src, want string }{
		{"{{ range(1000000000) | list | length }}", "range of 1000000000 items exceeds 100000"},
		{"{{ range(100001) | length }}", "exceeds 100000"},
		{"{{ 'x' * 100000000 }}", "would exceed 16777216 bytes"},
		{"{% set ns = namespace(s='xx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}", "exceed"},
		{"{% set ns = namespace(s=[1]) %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}", "exceed"},
		{"{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}", "output of"},
		{"{{ 'x' | center(1000000000) }}", "center(1000000000)"},
	} {
		start := time.Now()
		_, err := compile(t, tt.src).Render(nil)
		// On a loaded machine (-race) the time bound may stop a template
		// before its size bound does: either is the bound at work.
		if !errors.Is(err, ErrRenderLimit) || !strings.Contains(err.Error(), tt.want) && !strings.Contains(err.Error(), "took longer than") {
			t.Errorf("%s: err %v, want ErrRenderLimit with %q", tt.src, err, tt.want)
		}
		// The error above proves the bound stopped it; this only catches
		// a render that never stops. Not tighter: with -race on a loaded
		// two-core machine the 16 MB output bound alone took 13 s.
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("%s: took %s to fail", tt.src, d)
		}
	}
	for _, tt := range []struct {
		src  string
		want any
	}{
		{"{{ range(5) | list }}", []any{int64(0), int64(1), int64(2), int64(3), int64(4)}},
		{"{{ range(1, 10, 3) | list }}", []any{int64(1), int64(4), int64(7)}},
		{"{{ range(5, 0, -2) | list }}", []any{int64(5), int64(3), int64(1)}},
		{"{{ range(3, 1) | list }}", []any{}},
		{"{% for i in range(3) %}{{ i }}{% endfor %}", int64(12)}, // "012" read as NoETL reads it
		{"{{ [1, 2] + [3] }}", []any{int64(1), int64(2), int64(3)}},
		{"{{ 1 + 2.5 }}", 3.5},
		{"{{ 1 + 2 }}", int64(3)},
		{"{{ 'a' + 'b' }}", "ab"},
		{"{{ 'a' ~ 1 ~ none }}", "a1"},
		{"{{ 2 * 3 }}", int64(6)},
		{"{{ 2.5 * 2 }}", 5.0},
		{"{{ 'ab' * 3 }}", "ababab"},
		{"{{ (1 + 2) * 3 ~ '!' }}", "9!"},
		{"{{ 'x' | center(5) }}", "  x  "},
	} {
		if got := render(t, tt.src, nil); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s = %#v, want %#v", tt.src, got, tt.want)
		}
	}
	// A playbook's own limits, here a short timeout: nested loops that
	// write nothing still meet the clock at every range().
	pb, err := Parse("limits.yaml", []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: limits}
workflow:
  - step: start
    tool: {kind: noop, x: "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}done"}
`))
	if err != nil {
		t.Fatal(err)
	}
	pb.SetLimits(Limits{Timeout: 50 * time.Millisecond})
	start := time.Now()
	_, err = pb.Step("start").Tool[0].Config["x"].Render(nil)
	if !errors.Is(err, ErrRenderLimit) || !strings.Contains(err.Error(), "longer than 50ms") {
		t.Fatalf("nested loops: %v", err)
	}
	// The clock is met at every range(), so an inner loop runs to its end
	// first: 100,000 empty iterations, seconds under -race and load.
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("nested loops took %s to stop", d)
	}
	// Macros are refused when the playbook is parsed: one that calls
	// itself would overflow the stack and kill the process.
	if _, err := CompileTemplate("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", Pos{}); err == nil {
		t.Fatal("a macro compiled")
	}
}
