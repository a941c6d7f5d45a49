package dsl_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cursorflow/cursorflow/dsl"
)

func Example() {
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: hello
workload:
  who: world
workflow:
  - step: start
    tool:
      kind: python
      code: print("hi")
    next: [greet]
  - step: greet
    loop:
      in: [1, 2, 3]
      iterator: n
      spec: {mode: parallel, max_in_flight: 2}
    tool:
      - name: say
        kind: http
        url: "https://example.com/hello/{{ who }}"
        spec:
          policy:
            rules:
              - when: "{{ output.status == 'error' }}"
                then: {do: retry, delay: 1}
              - else:
                  then: {do: continue}
`
	pb, err := dsl.Parse("hello.yaml", []byte(src))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range pb.Workflow {
		fmt.Printf("%s at %s: %d tool(s)\n", s.Name, s.Pos, len(s.Tool))
	}
	greet := pb.Step("greet")
	fmt.Println("loop:", greet.Loop.Mode, "max in flight", greet.Loop.MaxInFlight, "iterator", greet.Loop.Iterator)
	retry := greet.Tool[0].Policy.Rules[0].Then
	fmt.Println("retry:", retry.Attempts, "attempts,", retry.Backoff, "backoff every", retry.Delay)
	url, _ := greet.Tool[0].Config["url"].Render(map[string]any{"who": "world"})
	fmt.Println("url:", url)
	// Output:
	// start at hello.yaml:8:5: 1 tool(s)
	// greet at hello.yaml:13:5: 1 tool(s)
	// loop: parallel max in flight 2 iterator n
	// retry: 3 attempts, fixed backoff every 1s
	// url: https://example.com/hello/world
}

// Parse reports every problem at once, each with its position.
func ExampleParse_errors() {
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: broken}
workflow:
  - step: begin
    tool: {kind: noop}
    next: [finish]
  - step: begin
    loop: {in: "{{ items }}", iterator: item, spec: {mode: sideways}}
`
	_, err := dsl.Parse("broken.yaml", []byte(src))
	var problems dsl.ErrorList
	if errors.As(err, &problems) {
		for _, p := range problems {
			fmt.Println(p)
		}
	}
	// Output:
	// broken.yaml:5:5: workflow needs a step named "start"
	// broken.yaml:7:12: step begin: next step "finish" does not exist
	// broken.yaml:8:5: duplicate step name "begin" (first at line 5)
	// broken.yaml:8:5: step begin: tool is required
	// broken.yaml:9:60: step begin: bad loop mode "sideways" (want sequential, parallel, async, chunked or cursor)
}

// A field the build does not honour is not a parse error: the playbook
// validates, and Refusals says what the engine will refuse to run.
func ExampleParse_refusals() {
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: refusals}
workflow:
  - step: start
    colour: blue
    loop:
      in: [1, 2]
      iterator: x
      aggregate: {sum: '{{ x }}'}
    tool: {kind: noop}
`
	pb, err := dsl.Parse("flow.yaml", []byte(src))
	fmt.Println("parse error:", err)
	for _, r := range pb.Refusals {
		fmt.Println(r.Pos, r.Message[:strings.Index(r.Message, " (")])
	}
	// Output:
	// parse error: <nil>
	// flow.yaml:6:5 step start: unknown key "colour"
	// flow.yaml:10:7 step start: loop.aggregate is not supported by this build: NoETL's loop result reducer is not implemented; the loop's result is NoETL's default aggregate {results, stats}
}

// LookupField says what this build does with a field.
func ExampleLookupField() {
	for _, path := range []string{"step.retry", "loop.aggregate", "step.output.store", "playbook.metadata.labels", "task.url"} {
		if f := dsl.LookupField(path); f != nil {
			fmt.Printf("%s: %s\n", path, f.Support)
		}
	}
	// Output:
	// step.retry: honoured
	// loop.aggregate: refused
	// step.output.store: honoured
	// playbook.metadata.labels: descriptive
	// task.url: honoured
}
