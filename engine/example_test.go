package engine_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// A host registers its own Go function as a tool kind, runs a playbook
// whose loop calls it for every item, and reads the outcome.
func Example() {
	reg := tools.NewRegistry()
	reg.MustRegister("shout", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		return strings.ToUpper(fmt.Sprint(call.Config["word"])), nil
	}))
	e, err := engine.New(engine.Config{Log: eventlog.NewMemory(), Tools: reg})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	playbook := `
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: shout}
workload:
  words: [cursor, flow]
workflow:
  - step: start
    loop:
      in: '{{ words }}'
      iterator: word
      spec: {mode: parallel, max_in_flight: 2}
    tool: {kind: shout, word: '{{ iter.word }}'}
    next:
      - step: join
        when: '{{ event.name == "loop.done" }}'
  - step: join
    tool: {kind: shout, word: '{{ start.results | join("-") }}'}
`
	ctx := context.Background()
	id, err := e.Start(ctx, []byte(playbook), engine.StartOptions{File: "shout.yaml"})
	if err != nil {
		panic(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(sum.Status, sum.Results["join"].(map[string]any)["data"])
	// Output: completed CURSOR-FLOW
}

// Check lists what a playbook uses that this build, with these
// registries, would refuse to run; Start refuses the same.
func ExampleCheck() {
	pb, _ := dsl.Parse("flow.yaml", []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: check}
workflow:
  - step: start
    tool: {kind: snowflake, query: SELECT 1}
`))
	reg := tools.NewRegistry()
	reg.MustRegister("noop", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	for _, p := range engine.Check(pb, reg, nil) {
		fmt.Println(p.Error())
	}
	// Output:
	// flow.yaml:6:11: step start: tool kind "snowflake" is not registered in this engine (refused at run)
}
