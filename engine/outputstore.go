package engine

import (
	"fmt"
	"strconv"

	"github.com/cursorflow/cursorflow/dsl"
)

// NoETL writes where a result goes in an output block, on the step or in
// its tool:
//
//	output:
//	  store: {kind: auto|memory|kv|object|s3|gcs|db|...}
//	  inline_max_bytes: 65536
//
// Here there is one result store (Config.Results): kind auto (or no kind)
// stores a result larger than inline_max_bytes (default: the store's
// threshold), memory and inline keep it in the event log whatever its
// size, and any other kind stores it whatever its size.

// outputPolicy is what a step's output block asks of its result.
type outputPolicy struct {
	kind      string
	inlineMax int64
	pos       dsl.Pos
}

// outputPolicyOf reads the output block of the step's last task (NoETL's
// place for it, inside tool:), else of the step.
func outputPolicyOf(pb *dsl.Playbook, step *dsl.Step) outputPolicy {
	if tasks := tasksOf(pb, step); len(tasks) > 0 {
		if v := tasks[len(tasks)-1].Config["output"]; v != nil {
			return policyOf(v)
		}
	}
	if v := step.Extra["output"]; v != nil {
		return policyOf(v)
	}
	return outputPolicy{}
}

func policyOf(v *dsl.Value) outputPolicy {
	p := outputPolicy{pos: v.Pos}
	m, ok := v.Raw().(map[string]any)
	if !ok {
		return p
	}
	if st, ok := m["store"].(map[string]any); ok {
		p.kind, _ = st["kind"].(string)
	}
	switch n := m["inline_max_bytes"].(type) {
	case int64:
		p.inlineMax = n
	case float64:
		p.inlineMax = int64(n)
	case string:
		p.inlineMax, _ = strconv.ParseInt(n, 10, 64)
	}
	return p
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

// needsStore returns the first step whose output block asks for a result
// store (an explicit store kind), for refusing a playbook an engine
// without one cannot honour.
func needsStore(pb *dsl.Playbook) error {
	for _, st := range pb.Workflow {
		if p := outputPolicyOf(pb, st); p.always() {
			return dsl.ErrorList{&dsl.Diagnostic{Pos: p.pos, Message: fmt.Sprintf(
				"step %s: output.store.kind %s keeps results in a result store, and this engine has none (engine.Config.Results, --result-store)", st.Name, p.kind)}}
		}
	}
	return nil
}
