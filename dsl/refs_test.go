package dsl

import (
	"errors"
	"strings"
	"testing"
)

// testRefs resolves the string "REF" held by the names it holds into a
// list, counting its calls.
type testRefs struct {
	holds map[string]bool
	calls map[string]int
	err   error
}

func (r *testRefs) Holds(name string) bool { return r.holds[name] }

func (r *testRefs) Resolve(name string, v any) (any, error) {
	r.calls[name]++
	if r.err != nil {
		return nil, r.err
	}
	m := v.(map[string]any)
	out := map[string]any{}
	for k, x := range m {
		if x == "REF" {
			x = []any{int64(1), int64(2), int64(3)}
		}
		out[k] = x
	}
	return out, nil
}

func TestRefsResolveOnlyWhatATemplateReads(t *testing.T) {
	refs := &testRefs{holds: map[string]bool{"big": true, "ctx": true}, calls: map[string]int{}}
	vars := map[string]any{
		RefsVar: refs,
		"big":   map[string]any{"rows": "REF"},
		"ctx":   map[string]any{"n": int64(7)},
		"small": map[string]any{"rows": []any{int64(9)}},
	}
	for _, tc := range []struct {
		src  string
		want any
		big  int
	}{
		{"{{ small.rows | length }}", int64(1), 0},
		{"{{ big.rows | length }}", int64(3), 1},
		{"{% for r in big.rows %}-{{ r }}{% endfor %}", "-1-2-3", 2},
		{"{{ ctx.n + (small.rows | first) }}", int64(16), 2},
	} {
		tpl, err := CompileTemplate(tc.src, Pos{Line: 1, Col: 1})
		if err != nil {
			t.Fatal(err)
		}
		got, err := tpl.Render(vars)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if got != tc.want || refs.calls["big"] != tc.big {
			t.Fatalf("%s = %v (big resolved %d times), want %v (%d)", tc.src, got, refs.calls["big"], tc.want, tc.big)
		}
	}
	if m := vars["big"].(map[string]any); m["rows"] != "REF" {
		t.Fatalf("the caller's variables changed: %v", m)
	}
	if names := mustCompile(t, "{{ a.b }}{% if c %}{{ d | default(e) }}{% endif %}").Names(); strings.Join(names, ",") != "a,c,d,e" {
		t.Fatalf("Names = %v", names)
	}
	refs.err = errors.New("object gone")
	tpl := mustCompile(t, "{{ big.rows }}")
	tpl.Pos = Pos{File: "f.yaml", Line: 3, Col: 9}
	if _, err := tpl.Render(vars); err == nil || !strings.Contains(err.Error(), "f.yaml:3:9") || !strings.Contains(err.Error(), "stored value of big: object gone") {
		t.Fatalf("a failed resolve: %v", err)
	}
}

func mustCompile(t *testing.T, src string) *Template {
	t.Helper()
	tpl, err := CompileTemplate(src, Pos{Line: 1, Col: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}
