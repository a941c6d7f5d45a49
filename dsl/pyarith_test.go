package dsl

import (
	"reflect"
	"strings"
	"testing"
)

// TestPythonArithmetic compares with what Python's Jinja2 3.1 renders
// for the same templates (its values written out here by hand).
func TestPythonArithmetic(t *testing.T) {
	t.Parallel()
	vars := map[string]any{
		"flags": []any{true, false, true},
		"t":     true,
		"rows":  []any{map[string]any{"ok": true, "n": map[string]any{"v": int64(2)}}, map[string]any{"ok": true, "n": map[string]any{"v": 1.5}}},
		"d":     map[string]any{"b": int64(1), "a": int64(2), "C": int64(0)},
		"maxi":  int64(9223372036854775807),
	}
	tests := []struct {
		src  string
		want any
	}{
		// A bool is the int 0 or 1.
		{"{{ true + 1 }}", int64(2)},
		{"{{ true + true }}", int64(2)},
		{"{{ t * 5 }}", int64(5)},
		{"{{ true - 1 }}", int64(0)},
		{"{{ 10 - true }}", int64(9)},
		{"{{ true / 2 }}", 0.5},
		{"{{ 7 // true }}", int64(7)},
		{"{{ flags | sum }}", int64(2)},
		{"{{ rows | map(attribute='ok') | sum }}", int64(2)},
		{"{{ rows | sum(attribute='ok') }}", int64(2)},
		{"{{ rows | sum(attribute='n.v') }}", 3.5},
		{"{{ [1, 2] | sum(start=10) }}", int64(13)},
		{"{{ [] | sum }}", int64(0)},
		// Repetition either way round; a string and a number do not add.
		{"{{ 'ab' * 2 }}", "abab"},
		{"{{ 2 * 'ab' }}", "abab"},
		{"{{ 'ab' * true }}", "ab"},
		{"{{ [1] * 3 }}", []any{int64(1), int64(1), int64(1)}},
		{"{{ 'a' + 'b' }}", "ab"},
		// No wrap-around past int64.
		{"{{ maxi + 1 }}", 9223372036854775808.0},
		{"{{ maxi * 2 }}", 18446744073709551614.0},
		{"{{ -maxi - 2 }}", -9223372036854775809.0},
		// dictsort of a mapping built in the template, too.
		{"{{ {'b': 1, 'a': 2} | dictsort }}", []any{[]any{"a", int64(2)}, []any{"b", int64(1)}}},
		{"{{ dict(a=1) | dictsort }}", []any{[]any{"a", int64(1)}}},
		{"{{ {'b': 1, 'a': 2} | dictsort(by='value') }}", []any{[]any{"b", int64(1)}, []any{"a", int64(2)}}},
		{"{% for k, v in {'b': 1, 'a': 2} | dictsort %}{{ k }}={{ v }},{% endfor %}", "a=2,b=1,"},
		{"{{ d | dictsort | map('first') | join(',') }}", "a,b,C"},
		{"{{ d | dictsort(true) | map('first') | join(',') }}", "C,a,b"},
		{"{{ d | dictsort(reverse=true) | map('first') | join(',') }}", "C,b,a"},
		// round: a tie goes to the even digit, the float's exact value counts.
		{"{{ 2.5 | round }}", 2.0},
		{"{{ 3.5 | round }}", 4.0},
		{"{{ -2.5 | round }}", -2.0},
		{"{{ 2.675 | round(2) }}", 2.67},
		{"{{ 1234.5 | round(-2) }}", 1200.0},
		{"{{ 3 | round }}", int64(3)},
		{"{{ 2.7 | round(0, 'floor') }}", 2.0},
		{"{{ 2.1 | round(0, 'ceil') }}", 3.0},
		{"{{ 2.12 | round(1, 'ceil') }}", 2.2},
	}
	for _, tt := range tests {
		tpl, err := CompileTemplate(tt.src, Pos{})
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		got, err := tpl.Render(vars)
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s = %#v, want %#v", tt.src, got, tt.want)
		}
	}
}

// TestPythonArithmeticErrors: where Python raises a TypeError, the render
// fails with Python's message, not gonja's internals.
func TestPythonArithmeticErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{"{{ '1' + 1 }}", "unsupported operand types for +: 'str' and 'int'"},
		{"{{ 1 + '1' }}", "unsupported operand types for +: 'int' and 'str'"},
		{"x{{ 'a' - 1 }}", "unsupported operand types for -: 'str' and 'int'"},
		{"{{ 'a' * 'b' }}", "unsupported operand types for *: 'str' and 'str'"},
		{"{{ [1, 'a'] | sum }}", "filter sum: unsupported operand types for +: 'int' and 'str'"},
		{"{{ {'a': 1, 2: 1} | dictsort }}", "'<' not supported between instances of"},
		{"{{ 1 / 0 }}", `"{{ 1 / 0 }}": division by zero`},
		{"{{ 'x' | round }}", "type str doesn't define __round__ method"},
	}
	for _, tt := range tests {
		tpl, err := CompileTemplate(tt.src, Pos{})
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		_, err = tpl.Render(nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "_cursorflow") {
			t.Errorf("%s: error %v, want one saying %q", tt.src, err, tt.want)
		}
	}
}
