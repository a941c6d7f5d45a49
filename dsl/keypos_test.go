package dsl

import "testing"

// TestTaskKeyPos: every configuration key records where the key itself is
// written — in a tool mapping, on a step that names its tool (tool:
// KIND), and in a sink, whose tool: mapping's keys are merged in — so a
// message about the key points at it, not at its value.
func TestTaskKeyPos(t *testing.T) {
	t.Parallel()
	src := `workflow:
  - step: start
    tool:
      kind: http
      url: http://x
      parms:
        - 1
    sink: {tool: {kind: postgres, auth: pg}, table: t}
    next: [b]
  - step: b
    tool: postgres
    auth: pg
`
	pb, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	a, b := pb.Workflow[0], pb.Workflow[1]
	for _, c := range []struct {
		task      *Task
		key       string
		line, col int
	}{
		{a.Tool[0], "url", 5, 7},
		{a.Tool[0], "parms", 6, 7},
		{a.Sink.Task, "auth", 8, 35},
		{a.Sink.Task, "table", 8, 46},
		{b.Tool[0], "auth", 12, 5},
	} {
		got := c.task.KeyPos[c.key]
		if got.File != "p.yaml" || got.Line != c.line || got.Col != c.col {
			t.Errorf("%s at %v, want %d:%d", c.key, got, c.line, c.col)
		}
	}
}
