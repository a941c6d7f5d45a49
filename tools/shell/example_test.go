package shell_test

import (
	"context"
	"fmt"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/shell"
)

func Example() {
	tool := shell.New(shell.Config{})
	out, _ := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{
		"command": `printf 'hello %s' "$WHO"`,
		"env":     map[string]any{"WHO": "world"},
	}})
	data := out.Data.(map[string]any)
	fmt.Println(out.Status, data["exit_code"], data["stdout"])
	// Output:
	// success 0 hello world
}
