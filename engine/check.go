package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/tools"
)

// ErrUnsupported is wrapped by the error Start (and Resume) returns for a
// playbook that uses a field this build does not honour, or a tool or
// cursor kind the engine has no registration for.
var ErrUnsupported = errors.New("engine: playbook uses what this build does not run")

// UnsupportedError lists why a playbook was refused before anything ran:
// each problem names file:line:col and the field or kind.
type UnsupportedError struct {
	Problems []dsl.Diagnostic
}

// Error formats the problems one per line.
func (e *UnsupportedError) Error() string {
	lines := make([]string, len(e.Problems))
	for i := range e.Problems {
		lines[i] = e.Problems[i].Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrUnsupported) hold.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Check lists what in pb this build would not run: the fields dsl refuses
// (pb.Refusals), tool kinds that toolReg does not hold or holds turned off
// (a tools.Disabler: python, shell, duckdb not enabled) and cursor kinds
// that cursorReg does not hold. A nil registry skips its check (the
// orchestrator of a scale-out deployment does not know its workers'
// tools). The problems are warnings, sorted by position.
func Check(pb *dsl.Playbook, toolReg *tools.Registry, cursorReg *cursor.Registry) []dsl.Diagnostic {
	return check(pb, toolReg, cursorReg, true)
}

// check is Check; offRefused says whether a kind toolReg holds turned off
// is refused: only where toolReg's tools are the ones that run (an engine
// with workers of its own), not where remote workers run their own.
func check(pb *dsl.Playbook, toolReg *tools.Registry, cursorReg *cursor.Registry, offRefused bool) []dsl.Diagnostic {
	if pb == nil {
		return []dsl.Diagnostic{{Message: "no playbook (nil)"}}
	}
	out := slices.Clone(pb.Refusals)
	add := func(pos dsl.Pos, format string, args ...any) {
		out = append(out, dsl.Diagnostic{Pos: pos, Message: fmt.Sprintf(format, args...), Warning: true})
	}
	if toolReg != nil {
		for _, r := range pb.RequiresTools {
			tool, err := toolReg.Lookup(r.Name)
			if err != nil {
				add(r.Pos, "executor.requires.tools: tool kind %q is not registered in this engine (refused at run)", r.Name)
			} else if why, off := tools.Disabled(tool); off && offRefused {
				add(r.Pos, "executor.requires.tools: tool kind %q is turned off in this engine: %s (refused at run)", r.Name, why)
			}
		}
		eachTask(pb, func(t *dsl.Task, what string, _ taskRole) {
			if t.Kind == "" || t.Kind == "workbook" {
				return
			}
			tool, err := toolReg.Lookup(t.Kind)
			if err != nil {
				add(t.Pos, "%s: tool kind %q is not registered in this engine (refused at run)", what, t.Kind)
			} else if why, off := tools.Disabled(tool); off && offRefused {
				add(t.Pos, "%s: tool kind %q is turned off in this engine: %s (refused at run)", what, t.Kind, why)
			}
		})
	}
	if cursorReg != nil {
		for _, s := range pb.Workflow {
			if s.Loop == nil || s.Loop.Cursor == nil || s.Loop.Cursor.Kind == "" {
				continue
			}
			if _, err := cursorReg.Lookup(s.Loop.Cursor.Kind); err != nil {
				add(s.Loop.Cursor.Pos, "step %s: cursor kind %q is not registered in this engine (refused at run)", s.Name, s.Loop.Cursor.Kind)
			}
		}
	}
	sortByPos(out)
	return out
}

// sortByPos sorts diagnostics by line and column, keeping the order of
// those at one position.
func sortByPos(ds []dsl.Diagnostic) {
	slices.SortStableFunc(ds, func(a, b dsl.Diagnostic) int { return a.Pos.Compare(b.Pos) })
}

// taskRole says where eachTask found a task.
type taskRole int

const (
	roleTool   taskRole = iota // a step's tool or pipeline task
	roleSink                   // a sink's task
	roleAction                 // a workbook action's tool
)

// eachTask calls visit with every task of pb — steps' tools and pipeline
// tasks, workbook actions, and the sinks of tasks, steps, loops and retry
// rules — and the label messages about it start with.
func eachTask(pb *dsl.Playbook, visit func(t *dsl.Task, what string, role taskRole)) {
	sink := func(s *dsl.Sink, what string) {
		if s != nil && s.Task != nil {
			visit(s.Task, what, roleSink)
		}
	}
	retrySinks := func(r *dsl.Retry, what string) {
		if r != nil {
			for _, rule := range r.Rules {
				sink(rule.Sink, what+": retry sink")
			}
		}
	}
	task := func(t *dsl.Task, what string, role taskRole) {
		if t == nil {
			return
		}
		visit(t, what, role)
		sink(t.Sink, what+": sink")
		retrySinks(t.Retry, what)
	}
	for _, s := range pb.Workflow {
		what := "step " + s.Name
		for _, t := range s.Tool {
			if t.Name != "" {
				task(t, what+": task "+t.Name, roleTool)
			} else {
				task(t, what, roleTool)
			}
		}
		sink(s.Sink, what+": sink")
		if s.Loop != nil {
			sink(s.Loop.Sink, what+": loop.sink")
		}
		retrySinks(s.Retry, what)
	}
	for _, t := range pb.Workbook {
		task(t, "workbook action "+t.Name, roleAction)
	}
}
