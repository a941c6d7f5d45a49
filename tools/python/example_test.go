package python_test

import (
	"context"
	"fmt"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/python"
)

// NoETL code ends with a bare top-level return; the step's input keys are
// variables of their own and also sit in input_data. (Not run by go test:
// it needs python3.)
func Example() {
	tool := python.New(python.Config{})
	out, err := tool.Execute(context.Background(), &tools.Call{
		Args: map[string]any{"num": 21},
		Config: map[string]any{"code": `
print("doubling", num)          # goes to the log, not the result
return {"doubled": num * 2, "keys": list(input_data)}
`},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Status, out.Data) // success map[doubled:42 keys:[num]]
}
