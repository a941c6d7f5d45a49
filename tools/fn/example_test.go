package fn_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// A host service registers its own Go function as the tool kind "enrich";
// playbooks call it with `tool: {kind: enrich, name: "{{ iter.user.name }}"}`.
func Example() {
	reg := tools.NewRegistry()
	reg.MustRegister("enrich", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		name, _ := call.Config["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("enrich: name is empty") // an error Output: policies may retry
		}
		return map[string]any{"greeting": "hello " + strings.ToUpper(name)}, nil
	}))

	tool, err := reg.Lookup("enrich")
	if err != nil {
		panic(err)
	}
	out, _ := tool.Execute(context.Background(), &tools.Call{Kind: "enrich", Config: map[string]any{"name": "ada"}})
	fmt.Println(out.Status, out.Data)
	out, _ = tool.Execute(context.Background(), &tools.Call{Kind: "enrich", Config: map[string]any{}})
	fmt.Println(out.Status, out.Error)
	// Output:
	// success map[greeting:hello ADA]
	// error enrich: name is empty
}
