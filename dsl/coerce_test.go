package dsl

import (
	"reflect"
	"testing"
)

// TestTextReadAsNoETLDoes: a text template's result is read as NoETL's
// render_template reads it (the values below are what its Python code
// gives for the same text); one that uses tojson stays text, and
// RenderString always gives the text.
func TestTextReadAsNoETLDoes(t *testing.T) {
	t.Parallel()
	vars := map[string]any{"items": []any{int64(1), int64(2), int64(3)}, "n": int64(7), "s": "abc", "yes": true, "no": false,
		"ids": []any{"a", "b"}, "a": int64(1), "b": int64(2), "zip": "007", "pre": "8901", "acct": "2600000000000000001", "name": "O'Brien"}
	for _, tt := range []struct {
		src  string
		want any
	}{
		{"[{% for x in items %}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}]", []any{int64(1), int64(2), int64(3)}},
		{`{"a": {{ n }}, "s": "{{ s }}"}`, map[string]any{"a": int64(7), "s": "abc"}},
		{"['{{ s }}', {{ n }}, None, True]", []any{"abc", int64(7), nil, true}},
		{"{'k': {{ n }}}", map[string]any{"k": int64(7)}},
		{"{{ n }}{{ n }}", int64(77)},
		{"{{ zip }}!", "007!"},
		{"{% if yes %}true{% else %}false{% endif %}", true},
		{"{% if no %}True{% else %}False{% endif %}", false},
		{"{% if yes %}None{% endif %}", nil},
		{"{% if no %}x{% endif %}", ""},
		{"{{ a }}-{{ b }}", "1-2"},
		{"{{ n }}.5", 7.5},
		{"-{{ n }}", int64(-7)},
		{"'{{ s }}'", "abc"},
		{"{{ s }} items", "abc items"},
		{"{{ a }}, {{ b }}", []any{int64(1), int64(2)}},
		{`{"ids": {{ ids | tojson }}}`, `{"ids": ["a", "b"]}`},
		{"[{{ s }}", "[abc"},
		// Python keeps every digit of a long int; a float would not.
		{"{{ pre }}{{ acct }}", "89012600000000000000001"},
		{`{"id": {{ pre }}{{ acct }}}`, `{"id": 89012600000000000000001}`},
		// Python refuses 007 as a literal: the text stays.
		{`{"a": {{ zip }}}`, `{"a": 007}`},
		{"[1, {{ zip }}]", "[1, 007]"},
		// SQL text stays SQL text.
		{"{{ name | sql_literal }}, {{ s | sql_literal }}", "'O''Brien', 'abc'"},
	} {
		tpl, err := CompileTemplate(tt.src, Pos{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := tpl.Render(vars)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s = %#v (%v), want %#v", tt.src, got, err, tt.want)
		}
		if s, err := tpl.RenderString(vars); err != nil || s == "" && tt.want != "" && tt.want != nil {
			t.Errorf("%s: RenderString = %q (%v), want the text", tt.src, s, err)
		}
	}
}
