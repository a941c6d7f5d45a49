package dsl_test

import (
	"fmt"

	"github.com/cursorflow/cursorflow/dsl"
)

// A template that is exactly one {{ expression }} renders to the
// expression's native value; anything else renders to a string.
func ExampleCompileTemplate() {
	vars := map[string]any{
		"workload": map[string]any{"numbers": []any{1, 2, 3}},
		"iter":     map[string]any{"patient": map[string]any{"patient_id": "12"}},
	}
	for _, src := range []string{
		"{{ workload.numbers }}",
		"{{ iter.patient.patient_id | int }}",
		"{{ workload.numbers | length > 2 }}",
		"patient {{ iter.patient.patient_id }}",
		"{{ output.data.rows[0].id | default('none yet') }}",
	} {
		t, err := dsl.CompileTemplate(src, dsl.Pos{File: "playbook.yaml", Line: 1, Col: 1})
		if err != nil {
			fmt.Println(err)
			continue
		}
		v, err := t.Render(vars)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%T %v\n", v, v)
	}
	// Output:
	// []interface {} [1 2 3]
	// int64 12
	// bool true
	// string patient 12
	// string none yet
}

// Value trees hold compiled templates at their string leaves.
func ExampleRenderMap() {
	url, _ := dsl.NewScalarValue("{{ api }}/patients/{{ iter.id }}", dsl.Pos{Line: 3, Col: 10})
	args := map[string]*dsl.Value{
		"url":   url,
		"limit": dsl.NewLiteralValue(int64(50), dsl.Pos{Line: 4, Col: 12}),
	}
	out, err := dsl.RenderMap(args, map[string]any{"api": "http://pft", "iter": map[string]any{"id": 7}})
	fmt.Println(out["url"], out["limit"], err)
	// Output: http://pft/patients/7 50 <nil>
}
