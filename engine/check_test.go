package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools/builtin"
)

// TestStartRefusesWhatItDoesNotRun: a playbook that names an unregistered
// tool kind or a field this build does not honour is refused by Start,
// naming file:line:col and the field or kind, and nothing reaches the log.
func TestStartRefusesWhatItDoesNotRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{
			name: "unregistered tool kind",
			src: header + `
workflow:
  - step: start
    tool: {kind: duckdb, query: select 1}
`,
			want: []string{`test.yaml:7:11: step start: tool kind "duckdb" is not registered in this engine`},
		},
		{
			name: "unregistered kind in a pipeline, a workbook action and a sink",
			src: header + `
workbook:
  - name: wb
    tool: {kind: snowflake, query: x}
workflow:
  - step: start
    tool:
      - name: a
        kind: rec
        sink: {tool: gcs, bucket: b}
      - name: b
        kind: container
`,
			want: []string{
				`test.yaml:7:11: workbook action wb: tool kind "snowflake"`,
				`test.yaml:13:15: step start: task a: sink: tool kind "gcs"`,
				`test.yaml:14:9: step start: task b: tool kind "container"`,
			},
		},
		{
			name: "unknown and refused fields",
			src: header + `
workflow:
  - step: start
    tool: {kind: rec}
    colour: red
    loop:
      in: [1]
      iterator: x
      aggregate: {sum: '{{ x }}'}
`,
			want: []string{
				`test.yaml:8:5: step start: unknown key "colour" (refused at run)`,
				`test.yaml:12:7: step start: loop.aggregate is not supported by this build`,
			},
		},
		{
			name: "executor requires a tool",
			src: header + `
executor:
  requires: {tools: [rec, kafka]}
workflow:
  - step: start
    tool: {kind: rec}
`,
			want: []string{`test.yaml:6:27: executor.requires.tools: tool kind "kafka" is not registered`},
		},
		{
			// Every command id holds the step's name, and the PostgreSQL
			// log indexes command ids (a btree row holds at most 2704
			// bytes): a longer name's first command could never be
			// recorded, and the batch that carried it failed with it,
			// over and over.
			name: "step name longer than MaxStepNameLen",
			src: header + `
workflow:
  - step: start
    tool: {kind: rec}
    next: [` + strings.Repeat("n", engine.MaxStepNameLen+1) + `]
  - step: ` + strings.Repeat("n", engine.MaxStepNameLen+1) + `
    tool: {kind: rec}
`,
			want: []string{`test.yaml:9:5: step name is 1025 bytes, more than 1024`},
		},
		{
			// No event log stores a NUL byte (eventlog.Validate): the
			// step's first command was refused by the log, with its
			// batch, over and over, while the execution stayed running.
			name: "step name with a NUL byte",
			src: header + `
workflow:
  - step: start
    tool: {kind: rec}
    next: ["a\0b"]
  - step: "a\0b"
    tool: {kind: rec}
`,
			want: []string{`test.yaml:9:5: step name "a\x00b" holds a NUL byte`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			const id = "refused-1"
			_, err := b.eng.Start(ctx, []byte(tt.src), engine.StartOptions{File: "test.yaml", ExecutionID: id})
			var ue *engine.UnsupportedError
			if !errors.Is(err, engine.ErrUnsupported) || !errors.As(err, &ue) {
				t.Fatalf("Start error = %v, want an UnsupportedError", err)
			}
			if len(ue.Problems) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%v", len(ue.Problems), len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			evs, rerr := b.log.Read(ctx, id, 0, 0)
			if rerr != nil || len(evs) != 0 {
				t.Fatalf("refused playbook left %d events (read error %v)", len(evs), rerr)
			}
		})
	}
}

// TestScaleOutOrchestratorSkipsKindCheck: an engine without workers and
// without a tools registry (the orchestrator of a scale-out deployment)
// cannot know its workers' kinds, so it checks fields only.
func TestScaleOutOrchestratorSkipsKindCheck(t *testing.T) {
	t.Parallel()
	e, err := engine.New(engine.Config{Log: newMemLog(), Workers: 0, Dispatcher: discard{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pb := mustParse(t, header+`
workflow:
  - step: start
    tool: {kind: anything_the_workers_have}
`)
	if probs := e.Check(pb); len(probs) != 0 {
		t.Fatalf("problems %v, want none", probs)
	}
}

type discard struct{}

func (discard) Dispatch(*engine.Command) {}
func (discard) Durable() bool            { return true }
func (discard) Cancel(string)            {}

func newMemLog() eventlog.Log { return eventlog.NewMemory() }

func mustParse(t *testing.T, src string) *dsl.Playbook {
	t.Helper()
	pb, err := dsl.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return pb
}

// TestToolTurnedOffRefusedWhereItRuns: an engine whose own workers run
// its commands refuses, at Start, a playbook using a kind its registry
// holds turned off (python without builtin.Options.EnablePython); an
// engine dispatching to remote workers, whose tools are their own, does
// not refuse it for its registry's sake.
func TestToolTurnedOffRefusedWhereItRuns(t *testing.T) {
	t.Parallel()
	pb := mustParse(t, header+`
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
`)
	treg, closer := builtin.NewRegistry(builtin.Options{})
	defer closer.Close()
	local, err := engine.New(engine.Config{Log: newMemLog(), Tools: treg, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if probs := local.Check(pb); len(probs) != 1 || !strings.Contains(probs[0].Message, `tool kind "python" is turned off in this engine`) {
		t.Fatalf("in-process engine: problems %v, want the python kind turned off", probs)
	}
	remote, err := engine.New(engine.Config{Log: newMemLog(), Tools: treg, Workers: 0, Dispatcher: discard{}})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	if probs := remote.Check(pb); len(probs) != 0 {
		t.Fatalf("dispatching engine: problems %v, want none", probs)
	}
}
