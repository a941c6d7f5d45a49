package dsl

// Template is a Jinja2 template compiled once when the playbook is parsed
// and rendered many times. Rendering is safe for concurrent use.
//
// A template whose source is exactly one {{ expression }} (surrounding
// whitespace allowed) renders to the expression's native value (list, map,
// number, bool, nil); any other template renders to a string. A source with
// no template syntax at all is a constant and renders without gonja.
type Template struct {
	Source string
	Pos    Pos
	// implementation fields are private
}

// CompileTemplate compiles src. A syntax error is returned as a
// *Diagnostic positioned at pos (adjusted into the source where possible).
func CompileTemplate(src string, pos Pos) (*Template, error) {
	panic("dsl: CompileTemplate not implemented yet")
}

// Render renders the template against vars and returns the native value
// (for a single-expression template) or the rendered string.
func (t *Template) Render(vars map[string]any) (any, error) {
	panic("dsl: Render not implemented yet")
}

// RenderString renders the template and formats the result as a string
// (maps and lists as JSON, nil as "").
func (t *Template) RenderString(vars map[string]any) (string, error) {
	panic("dsl: RenderString not implemented yet")
}

// Truthy renders the template and reports Jinja2 truthiness of the result
// ("false", "False", "0", "" and "none" strings count as false, as NoETL
// treats rendered guards). A nil template is true.
func (t *Template) Truthy(vars map[string]any) (bool, error) {
	panic("dsl: Truthy not implemented yet")
}

// Value is a YAML value with compiled templates at its string leaves.
// Render walks it and returns plain Go values: map[string]any, []any,
// string, int64/float64, bool, nil.
type Value struct {
	Pos Pos
	// implementation fields are private
}

// Render renders every template inside v against vars.
func (v *Value) Render(vars map[string]any) (any, error) {
	panic("dsl: Value.Render not implemented yet")
}

// Raw returns the value as written in the playbook, templates unrendered.
func (v *Value) Raw() any {
	panic("dsl: Value.Raw not implemented yet")
}

// RenderMap renders each value of m; a nil or empty map renders to an
// empty, non-nil map.
func RenderMap(m map[string]*Value, vars map[string]any) (map[string]any, error) {
	panic("dsl: RenderMap not implemented yet")
}
