package engine_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
	"github.com/cursorflow/cursorflow/tools/python"
)

// An arc's args are "arguments for the target": the target's tool is
// called with them (a python task's input_data, a noop's data, a host
// function's Call.Args), merged under the target step's own args, which
// were rendered seeing them and so win. They used to reach only the
// target's templates, so python code naming one failed with NameError.
func TestArcArgsReachTheToolCall(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	reg.MustRegister("noop", noop.New())
	reg.MustRegister("python", python.New(python.Config{}))
	reg.MustRegister("args", tools.ToolFunc(func(_ context.Context, c *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"args": c.Args}}, nil
	}))
	b := setupWith(t, engine.Config{Tools: reg})
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: noop}
    next:
      - step: plain
        args: {page: 2, who: arc}
  - step: plain
    tool: {kind: noop}
    next:
      - step: code
        args: {page: 2}
  - step: code
    tool:
      kind: python
      code: "return {'next_page': page + 1}"
    next:
      - step: both
        args: {page: 3, who: arc}
  - step: both
    args: {who: step, seen: '{{ who }}'}
    tool: {kind: args}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if got, want := data(t, sum, "plain"), map[string]any{"page": int64(2), "who": "arc"}; !reflect.DeepEqual(got, want) {
		t.Errorf("noop step reached by an arc with args returned %#v, want the arc's args %#v", got, want)
	}
	if got := data(t, sum, "code")["next_page"]; got != int64(3) {
		t.Errorf("python code reading the arc's arg page: next_page = %#v, want 3", got)
	}
	want := map[string]any{"page": int64(3), "who": "step", "seen": "arc"}
	if got := data(t, sum, "both")["args"]; !reflect.DeepEqual(got, want) {
		t.Errorf("Call.Args = %#v, want %#v (the arc's args under the step's own)", got, want)
	}
}
