package dsl

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// StartStep is the name of the step every workflow begins with.
const StartStep = "start"

// validate checks what decoding one node at a time cannot: names that
// must be unique, references between steps, tasks and jump targets. It
// also fills the playbook's step index.
func (d *decoder) validate(pb *Playbook) {
	pb.steps = make(map[string]*Step, len(pb.Workflow))
	for _, s := range pb.Workflow {
		if s.Name == "" {
			continue
		}
		if first, dup := pb.steps[s.Name]; dup {
			d.errorAt(s.Pos, "duplicate step name %q (first at line %d)", s.Name, first.Pos.Line)
			continue
		}
		pb.steps[s.Name] = s
	}
	tasks := make(map[string]*Task, len(pb.Workbook))
	for _, t := range pb.Workbook {
		if t.Name == "" {
			continue
		}
		if first, dup := tasks[t.Name]; dup {
			d.errorAt(t.Pos, "duplicate workbook task name %q (first at line %d)", t.Name, first.Pos.Line)
			continue
		}
		tasks[t.Name] = t
	}
	if len(pb.Workflow) > 0 && pb.steps[pb.Entry] == nil {
		if pb.Entry == StartStep {
			d.errorAt(pb.Workflow[0].Pos, "workflow needs a step named %q", StartStep)
		} else {
			d.errorAt(pb.Workflow[0].Pos, "executor.spec.entry_step names %q, which is not a step", pb.Entry)
		}
	}
	checkCall := func(t *Task, what string) {
		if t.Kind != "workbook" || t.Action == "" {
			return
		}
		action := tasks[t.Action]
		if action == nil {
			d.errorAt(t.Pos, "%s: workbook action %q does not exist", what, t.Action)
			return
		}
		t.Target = callTarget(t, action)
	}
	for _, t := range pb.Workbook {
		if t.Kind == "workbook" {
			d.errorAt(t.Pos, "workbook action %s: an action cannot call another workbook action", t.Name)
		}
	}

	for _, s := range pb.Workflow {
		what := stepLabel(s)
		switch {
		case s.Kind == "workbook":
			if s.TaskName != "" && tasks[s.TaskName] == nil {
				d.errorAt(s.Pos, "%s: workbook task %q does not exist", what, s.TaskName)
			}
		case len(s.Tool) == 0 && !d.toolKeyed[s]:
			// (A tool: that failed to decode was reported already.)
			d.errorAt(s.Pos, "%s: tool is required", what)
		}
		if s.Next != nil {
			for _, a := range s.Next.Arcs {
				if pb.steps[a.Step] == nil {
					d.errorAt(a.Pos, "%s: next step %q does not exist", what, a.Step)
				}
			}
		}
		// Jump targets: a task of the same pipeline, or a step.
		var pipeline []string
		if s.Pipeline {
			for _, t := range s.Tool {
				pipeline = append(pipeline, t.Name)
			}
		}
		for _, t := range s.Tool {
			d.checkJumps(pb, t.Policy, pipeline, what, s.Loop != nil)
			checkCall(t, what)
		}
		d.checkJumps(pb, s.Spec.Policy, pipeline, what, s.Loop != nil)
		if s.Loop != nil {
			d.checkJumps(pb, s.Loop.Policy, nil, what, true)
		}
	}
	for _, t := range pb.Workbook {
		d.checkJumps(pb, t.Policy, nil, "task "+t.Name, false)
	}
	d.checkReachable(pb)
	d.checkEndlessCycles(pb)
	d.checkEventNames(pb)
}

// eventNameIs matches a guard's test of event.name for equality with a
// literal.
var eventNameIs = regexp.MustCompile(`event\.name\s*==\s*['"]([a-z_.]+)['"]|['"]([a-z_.]+)['"]\s*==\s*event\.name`)

// checkEventNames warns about an arc whose guard asks for an event its
// step never routes with: loop.done of a step without a loop, call.done of
// a loop step, call.error of a step that fails the execution on error
// (no spec.on_error: continue). It never matches, and the flow after it
// silently never runs.
func (d *decoder) checkEventNames(pb *Playbook) {
	for _, s := range pb.Workflow {
		if s.Next == nil {
			continue
		}
		var never string
		switch {
		case s.Loop == nil:
			never = "loop.done"
		case s.Loop.Mode != ModeFanout:
			never = "call.done"
		default:
			continue
		}
		for _, a := range s.Next.Arcs {
			if a.When == nil {
				continue
			}
			for _, m := range eventNameIs.FindAllStringSubmatch(a.When.Source, -1) {
				if name := m[1] + m[2]; name == "call.error" && s.Loop == nil && s.Spec.OnError != "continue" && s.Spec.OnError != "ignore" {
					d.warns = append(d.warns, Diagnostic{Pos: a.When.Pos, Warning: true,
						Message: fmt.Sprintf("step %s: the arc to %s asks for event.name call.error, which comes only with spec.on_error: continue (or ignore): without it a failure of step %s fails the execution", s.Name, a.Step, s.Name)})
				}
				if name := m[1] + m[2]; name == never {
					kind := "has no loop: its arcs see call.done, or call.error"
					if s.Loop != nil {
						kind = "is a loop: its arcs see loop.done"
					}
					d.warns = append(d.warns, Diagnostic{Pos: a.When.Pos, Warning: true,
						Message: fmt.Sprintf("step %s: the arc to %s asks for event.name %s, which never comes: step %s %s", s.Name, a.Step, name, s.Name, kind)})
				}
			}
		}
	}
}

func (d *decoder) checkJumps(pb *Playbook, pol *Policy, pipeline []string, what string, inLoop bool) {
	if pol == nil {
		return
	}
	for _, r := range pol.Rules {
		to := r.Then.To
		if r.Then.Do != DoJump || to == "" {
			continue
		}
		if slices.Contains(pipeline, to) {
			continue
		}
		if pb.steps[to] != nil {
			if inLoop {
				// An item cannot leave its loop for another step.
				diag := Diagnostic{Pos: r.Then.Pos, Warning: true,
					Message: fmt.Sprintf("%s: jump to step %q from a loop's item is not supported: jump to a task of the item's pipeline, or route after the loop with next (refused at run)", what, to)}
				d.refusals = append(d.refusals, diag)
				d.warns = append(d.warns, diag)
			}
			continue
		}
		if pipeline != nil {
			d.errorAt(r.Then.Pos, "%s: jump target %q is neither a task of this pipeline nor a step", what, to)
		} else {
			d.errorAt(r.Then.Pos, "%s: jump target %q is not a step", what, to)
		}
	}
}

// checkEndlessCycles warns about a cycle of steps that every run goes
// round for ever: each step of it always takes the arc to the next (an
// exclusive next whose first arc has no when, an inclusive one's arc
// without a when) and none is guarded (when, admit). Only a failing step
// ends such an execution, which meanwhile writes events without bound.
func (d *decoder) checkEndlessCycles(pb *Playbook) {
	always := func(s *Step) []string {
		if s.Next == nil || len(s.Next.Arcs) == 0 || s.When != nil || s.Spec.Admit != nil {
			return nil
		}
		var out []string
		for _, a := range s.Next.Arcs {
			if a.When != nil {
				if s.Next.Mode == NextInclusive {
					continue
				}
				break // exclusive: a guarded arc first may win
			}
			out = append(out, a.Step)
			if s.Next.Mode != NextInclusive {
				break
			}
		}
		return out
	}
	// Depth-first search over the always-taken arcs; a step met again on
	// the current path closes a cycle.
	const (
		unseen = iota
		onPath
		done
	)
	state := map[*Step]int{}
	var path []*Step
	var walk func(s *Step)
	walk = func(s *Step) {
		state[s] = onPath
		path = append(path, s)
		for _, name := range always(s) {
			next := pb.steps[name]
			switch {
			case next == nil:
			case state[next] == onPath:
				i := slices.Index(path, next)
				names := make([]string, 0, len(path)-i+1)
				for _, p := range path[i:] {
					names = append(names, p.Name)
				}
				names = append(names, next.Name)
				d.warns = append(d.warns, Diagnostic{Pos: next.Pos, Warning: true, Message: fmt.Sprintf(
					"steps %s go round for ever: every arc on the way is taken without a when, so only a failing step ends the execution",
					strings.Join(names, " → "))})
			case state[next] == unseen:
				walk(next)
			}
		}
		path = path[:len(path)-1]
		state[s] = done
	}
	for _, s := range pb.Workflow {
		if s.Name != "" && pb.steps[s.Name] == s && state[s] == unseen {
			walk(s)
		}
	}
}

// checkReachable warns about steps that no path from start reaches.
func (d *decoder) checkReachable(pb *Playbook) {
	start := pb.steps[pb.Entry]
	if start == nil {
		return
	}
	seen := map[*Step]bool{start: true}
	queue := []*Step{start}
	visit := func(name string) {
		if s := pb.steps[name]; s != nil && !seen[s] {
			seen[s] = true
			queue = append(queue, s)
		}
	}
	visitPolicy := func(pol *Policy) {
		if pol == nil {
			return
		}
		for _, r := range pol.Rules {
			if r.Then.Do == DoJump {
				visit(r.Then.To)
			}
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s.Next != nil {
			for _, a := range s.Next.Arcs {
				visit(a.Step)
			}
		}
		for _, t := range s.Tool {
			visitPolicy(t.Policy)
		}
		visitPolicy(s.Spec.Policy)
		if s.Loop != nil {
			visitPolicy(s.Loop.Policy)
		}
		if s.Kind == "workbook" {
			visitPolicy(pb.WorkbookTask(s.TaskName).policyOrNil())
		}
	}
	for _, s := range pb.Workflow {
		if s.Name != "" && pb.steps[s.Name] == s && !seen[s] {
			d.warns = append(d.warns, Diagnostic{Pos: s.Pos, Message: "step " + s.Name + " is unreachable from " + pb.Entry, Warning: true})
		}
	}
}

func (t *Task) policyOrNil() *Policy {
	if t == nil {
		return nil
	}
	return t.Policy
}

// callTarget builds the task a workbook call runs: the action's tool, its
// default inputs overridden by the call's, and the call's own policy,
// timeout, set, retry and sink where it has them.
func callTarget(call, action *Task) *Task {
	t := *action
	t.Name = call.Name
	t.Pos = call.Pos
	t.Action = action.Name
	t.Config = make(map[string]*Value, len(action.Config)+1)
	for k, v := range action.Config {
		t.Config[k] = v
	}
	if in := call.Config["input"]; in != nil {
		t.Config["input"] = mergeMapValues(action.Config["input"], in)
	}
	if call.Policy != nil {
		t.Policy = call.Policy
	}
	if call.Timeout > 0 || call.TimeoutTemplate != nil {
		t.Timeout, t.TimeoutTemplate = call.Timeout, call.TimeoutTemplate
	}
	if len(call.Set) > 0 {
		t.Set = call.Set
	}
	if call.Retry != nil {
		t.Retry = call.Retry
	}
	if call.Sink != nil {
		t.Sink = call.Sink
	}
	return &t
}
