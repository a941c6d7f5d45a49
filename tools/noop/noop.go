// Package noop is cursorflow's noop tool: a step body that does nothing
// and succeeds, handy for routing-only steps and for tests.
//
// Data is the task's rendered configuration minus "kind"; when that is
// empty, the call's Args (the step's rendered args/input); nil when both
// are empty. A playbook can therefore use it to compute values:
//
//	tool:
//	  kind: noop
//	  total: "{{ a + b }}"
package noop

import (
	"context"

	"github.com/cursorflow/cursorflow/tools"
)

// Tool is the noop tool. The zero value is ready to use.
type Tool struct{}

// New returns the noop tool.
func New() Tool { return Tool{} }

// Execute returns success with the rendered configuration as Data.
func (Tool) Execute(_ context.Context, call *tools.Call) (tools.Output, error) {
	data := make(map[string]any, len(call.Config))
	for k, v := range call.Config {
		if k != "kind" {
			data[k] = v
		}
	}
	if len(data) == 0 {
		if len(call.Args) == 0 {
			return tools.Output{Status: tools.StatusSuccess}, nil
		}
		for k, v := range call.Args {
			data[k] = v
		}
	}
	return tools.Output{Status: tools.StatusSuccess, Data: data}, nil
}
