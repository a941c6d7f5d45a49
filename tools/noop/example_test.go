package noop_test

import (
	"context"
	"fmt"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
)

func Example() {
	out, _ := noop.New().Execute(context.Background(), &tools.Call{Config: map[string]any{"kind": "noop", "total": int64(5)}})
	fmt.Println(out.Status, out.Data)
	// Output:
	// success map[total:5]
}
