package dsl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func scalar(t *testing.T, s string, line int) *Value {
	t.Helper()
	v, err := NewScalarValue(s, Pos{File: "p.yaml", Line: line, Col: 3})
	if err != nil {
		t.Fatalf("NewScalarValue(%q): %v", s, err)
	}
	return v
}

func TestValueRender(t *testing.T) {
	t.Parallel()
	at := Pos{File: "p.yaml", Line: 1, Col: 1}
	v := NewMapValue(
		[]string{"url", "limit", "ids", "opts", "nothing"},
		[]*Value{
			scalar(t, "{{ api }}/users/{{ iter.id }}", 2),
			NewLiteralValue(10, at),
			NewListValue([]*Value{scalar(t, "{{ iter.id | int }}", 3), NewLiteralValue(2.5, at), scalar(t, "x", 4)}, at),
			NewMapValue([]string{"flag"}, []*Value{NewLiteralValue(true, at)}, at),
			NewLiteralValue(nil, at),
		}, at)
	vars := map[string]any{"api": "http://h", "iter": map[string]any{"id": "7"}}
	got, err := v.Render(vars)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"url":     "http://h/users/7",
		"limit":   int64(10),
		"ids":     []any{int64(7), 2.5, "x"},
		"opts":    map[string]any{"flag": true},
		"nothing": nil,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	if v.IsConstant() {
		t.Error("map with templates reports constant")
	}
	if !v.Get("opts").IsConstant() || !v.Get("limit").IsConstant() {
		t.Error("constant children report non-constant")
	}
	if keys := v.Keys(); !reflect.DeepEqual(keys, []string{"url", "limit", "ids", "opts", "nothing"}) {
		t.Errorf("Keys() = %v", keys)
	}
	if n := len(v.Get("ids").Items()); n != 3 {
		t.Errorf("Items() has %d entries", n)
	}
	if v.Get("missing") != nil || v.Items() != nil || v.Get("ids").Keys() != nil {
		t.Error("accessors of the wrong kind return non-nil")
	}
}

func TestValueRaw(t *testing.T) {
	t.Parallel()
	at := Pos{Line: 1, Col: 1}
	v := NewMapValue([]string{"a", "b"}, []*Value{
		scalar(t, "{{ x }}", 1),
		NewListValue([]*Value{NewLiteralValue(int32(1), at), scalar(t, "s", 2)}, at),
	}, at)
	want := map[string]any{"a": "{{ x }}", "b": []any{int64(1), "s"}}
	if got := v.Raw(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Raw() = %#v", got)
	}
	var nilV *Value
	if nilV.Raw() != nil {
		t.Error("nil Raw")
	}
	if r, err := nilV.Render(nil); r != nil || err != nil {
		t.Error("nil Render")
	}
}

func TestValueTemplateAndConstant(t *testing.T) {
	t.Parallel()
	tmpl := scalar(t, "{{ a }}", 1)
	if tmpl.Template() == nil || tmpl.Template().Source != "{{ a }}" || tmpl.IsConstant() {
		t.Error("template scalar")
	}
	plain := scalar(t, "SELECT 1", 1)
	if plain.Template() != nil || !plain.IsConstant() {
		t.Error("plain scalar")
	}
	lit := NewLiteralValue(uint8(3), Pos{})
	if lit.Template() != nil || !lit.IsConstant() {
		t.Error("literal")
	}
	if got, _ := lit.Render(nil); got != int64(3) {
		t.Errorf("literal normalised to %#v", got)
	}
	// A string given as a literal is never compiled.
	if got, _ := NewLiteralValue("{{ x }}", Pos{}).Render(map[string]any{"x": 1}); got != "{{ x }}" {
		t.Errorf("string literal rendered %#v", got)
	}
}

func TestConstantRenderIsOwned(t *testing.T) {
	t.Parallel()
	at := Pos{}
	v := NewMapValue([]string{"list"}, []*Value{NewListValue([]*Value{NewLiteralValue(1, at)}, at)}, at)
	first, _ := v.Render(nil)
	first.(map[string]any)["list"].([]any)[0] = "mutated"
	first.(map[string]any)["extra"] = true
	second, _ := v.Render(nil)
	if !reflect.DeepEqual(second, map[string]any{"list": []any{int64(1)}}) {
		t.Fatalf("constant render shared state: %#v", second)
	}
}

func TestValueSyntaxError(t *testing.T) {
	t.Parallel()
	_, err := NewScalarValue("{{ a b }}", Pos{File: "p.yaml", Line: 4, Col: 10})
	var d *Diagnostic
	if !errors.As(err, &d) || d.Pos.Line != 4 || d.Pos.Col != 15 {
		t.Fatalf("error %v", err)
	}
}

func TestValueRenderErrorPath(t *testing.T) {
	t.Parallel()
	at := Pos{}
	bad := scalar(t, "{{ x | fromjson }}", 9)
	v := NewMapValue([]string{"body"}, []*Value{
		NewMapValue([]string{"rows"}, []*Value{NewListValue([]*Value{scalar(t, "ok", 1), bad}, at)}, at),
	}, at)
	_, err := v.Render(map[string]any{"x": "{not json"})
	var pe *PathError
	if !errors.As(err, &pe) || pe.Path != "body.rows[1]" {
		t.Fatalf("error %v, want path body.rows[1]", err)
	}
	var re *RenderError
	if !errors.As(err, &re) || re.Pos.Line != 9 {
		t.Fatalf("error %v does not carry the RenderError", err)
	}
	if !strings.HasPrefix(err.Error(), "body.rows[1]: p.yaml:9:3: template") {
		t.Errorf("message %q", err.Error())
	}
}

func TestRenderMap(t *testing.T) {
	t.Parallel()
	for _, m := range []map[string]*Value{nil, {}} {
		got, err := RenderMap(m, nil)
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("RenderMap(%v) = %#v, %v; want empty non-nil map", m, got, err)
		}
	}
	m := map[string]*Value{
		"a": scalar(t, "{{ n + 1 }}", 1),
		"b": scalar(t, "b", 2),
		"c": nil,
	}
	got, err := RenderMap(m, map[string]any{"n": int64(1)})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"a": int64(2), "b": "b", "c": nil}) {
		t.Fatalf("got %#v, %v", got, err)
	}
	// With several failures the smallest key is reported, every time.
	bad := map[string]*Value{
		"zeta":  scalar(t, "{{ s | fromjson }}", 1),
		"alpha": scalar(t, "{{ s | fromjson }}", 2),
		"mid":   scalar(t, "{{ s | fromjson }}", 3),
	}
	for range 20 {
		_, err := RenderMap(bad, map[string]any{"s": "{"})
		var pe *PathError
		if !errors.As(err, &pe) || pe.Path != "alpha" {
			t.Fatalf("error %v, want path alpha", err)
		}
	}
}

func TestNewMapValueMismatchedLengths(t *testing.T) {
	t.Parallel()
	v := NewMapValue([]string{"a", "b"}, []*Value{NewLiteralValue(1, Pos{})}, Pos{})
	got, err := v.Render(nil)
	if err != nil || !reflect.DeepEqual(got, map[string]any{"a": int64(1)}) {
		t.Fatalf("got %#v, %v", got, err)
	}
}
