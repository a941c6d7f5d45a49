package engine

import (
	"fmt"

	"github.com/cursorflow/cursorflow/dsl"
)

// NoETL writes where a result goes in an output block, on the step or in
// its tool (dsl.OutputStore). Here there is one result store
// (Config.Results): kind auto (or no kind) stores a result larger than
// inline_max_bytes (default: the store's threshold), memory and inline
// keep it in the event log whatever its size, and any other kind stores
// it whatever its size.

// outputPolicy is what a step's output block asks of its result.
type outputPolicy struct {
	kind      string
	inlineMax int64
	pos       dsl.Pos
}

// outputPolicyOf reads the output block of the step's last task (NoETL's
// place for it, inside tool:), else of the step.
func outputPolicyOf(pb *dsl.Playbook, step *dsl.Step) outputPolicy {
	os := step.OutputStore
	if tasks := tasksOf(pb, step); len(tasks) > 0 && tasks[len(tasks)-1].OutputStore != nil {
		os = tasks[len(tasks)-1].OutputStore
	}
	if os == nil {
		return outputPolicy{}
	}
	return outputPolicy{kind: os.Kind, inlineMax: os.InlineMaxBytes, pos: os.Pos}
}

// inline reports whether the policy keeps the result in the log.
func (p outputPolicy) inline() bool {
	return p.kind == "memory" || p.kind == "inline"
}

// always reports whether the policy stores the result whatever its size.
func (p outputPolicy) always() bool {
	return p.kind != "" && p.kind != "auto" && !p.inline()
}

// threshold is the size above which the result is stored, def being the
// store's.
func (p outputPolicy) threshold(def int64) int64 {
	switch {
	case p.always():
		return 0
	case p.inlineMax > 0:
		return p.inlineMax
	}
	return def
}

// needsStore lists the steps whose output block asks for a result store
// (an explicit store kind), for refusing a playbook an engine without one
// cannot honour.
func needsStore(pb *dsl.Playbook) []dsl.Diagnostic {
	var out []dsl.Diagnostic
	for _, st := range pb.Workflow {
		if p := outputPolicyOf(pb, st); p.always() {
			out = append(out, dsl.Diagnostic{Pos: p.pos, Warning: true, Message: fmt.Sprintf(
				"step %s: output.store.kind %s keeps results in a result store, and this engine has none (engine.Config.Results, --result-store)", st.Name, p.kind)})
		}
	}
	return out
}
