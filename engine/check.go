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

// ErrUnsupported is wrapped by the error Start returns for a playbook that
// uses a field this build does not honour, or a tool or cursor kind the
// engine has no registration for.
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
// (pb.Refusals), tool kinds that toolReg does not hold and cursor kinds
// that cursorReg does not hold. A nil registry skips its check (the
// orchestrator of a scale-out deployment does not know its workers'
// tools). The problems are warnings, sorted by position.
func Check(pb *dsl.Playbook, toolReg *tools.Registry, cursorReg *cursor.Registry) []dsl.Diagnostic {
	out := slices.Clone(pb.Refusals)
	add := func(pos dsl.Pos, format string, args ...any) {
		out = append(out, dsl.Diagnostic{Pos: pos, Message: fmt.Sprintf(format, args...), Warning: true})
	}
	if toolReg != nil {
		for _, r := range pb.RequiresTools {
			if _, err := toolReg.Lookup(r.Name); err != nil {
				add(r.Pos, "executor.requires.tools: tool kind %q is not registered in this engine (refused at run)", r.Name)
			}
		}
		kind := func(t *dsl.Task, what string) {
			if t == nil || t.Kind == "" || t.Kind == "workbook" {
				return
			}
			if _, err := toolReg.Lookup(t.Kind); err != nil {
				add(t.Pos, "%s: tool kind %q is not registered in this engine (refused at run)", what, t.Kind)
			}
		}
		task := func(t *dsl.Task, what string) {
			kind(t, what)
			if t.Sink != nil {
				kind(t.Sink.Task, what+": sink")
			}
			if t.Retry != nil {
				for _, r := range t.Retry.Rules {
					if r.Sink != nil {
						kind(r.Sink.Task, what+": retry sink")
					}
				}
			}
		}
		for _, s := range pb.Workflow {
			what := "step " + s.Name
			for _, t := range s.Tool {
				if t.Name != "" {
					task(t, what+": task "+t.Name)
				} else {
					task(t, what)
				}
			}
			if s.Sink != nil {
				kind(s.Sink.Task, what+": sink")
			}
			if s.Loop != nil && s.Loop.Sink != nil {
				kind(s.Loop.Sink.Task, what+": loop.sink")
			}
			if s.Retry != nil {
				for _, r := range s.Retry.Rules {
					if r.Sink != nil {
						kind(r.Sink.Task, what+": retry sink")
					}
				}
			}
		}
		for _, t := range pb.Workbook {
			task(t, "workbook action "+t.Name)
		}
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
	slices.SortStableFunc(out, func(a, b dsl.Diagnostic) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		return a.Pos.Col - b.Pos.Col
	})
	return out
}
