package dsl

import "slices"

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
	if len(pb.Workflow) > 0 && pb.steps[StartStep] == nil {
		d.errorAt(pb.Workflow[0].Pos, "workflow needs a step named %q", StartStep)
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
			d.checkJumps(pb, t.Policy, pipeline, what)
		}
		d.checkJumps(pb, s.Spec.Policy, pipeline, what)
		if s.Loop != nil {
			d.checkJumps(pb, s.Loop.Policy, nil, what)
		}
	}
	for _, t := range pb.Workbook {
		d.checkJumps(pb, t.Policy, nil, "task "+t.Name)
	}
	d.checkReachable(pb)
}

func (d *decoder) checkJumps(pb *Playbook, pol *Policy, pipeline []string, what string) {
	if pol == nil {
		return
	}
	for _, r := range pol.Rules {
		to := r.Then.To
		if r.Then.Do != DoJump || to == "" {
			continue
		}
		if slices.Contains(pipeline, to) || pb.steps[to] != nil {
			continue
		}
		if pipeline != nil {
			d.errorAt(r.Then.Pos, "%s: jump target %q is neither a task of this pipeline nor a step", what, to)
		} else {
			d.errorAt(r.Then.Pos, "%s: jump target %q is not a step", what, to)
		}
	}
}

// checkReachable warns about steps that no path from start reaches.
func (d *decoder) checkReachable(pb *Playbook) {
	start := pb.steps[StartStep]
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
			d.warns = append(d.warns, Diagnostic{Pos: s.Pos, Message: "step " + s.Name + " is unreachable from start", Warning: true})
		}
	}
}

func (t *Task) policyOrNil() *Policy {
	if t == nil {
		return nil
	}
	return t.Policy
}
