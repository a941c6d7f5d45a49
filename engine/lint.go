package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/cursor/sqlcursor"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/tools"
)

// Lint lists the configuration keys of pb's tasks that nothing reads: a
// key a task's tool does not list (tools.ConfigKeyLister) — a typo such
// as parms for params, or a setting of NoETL's own tool this build's
// does not have — and a key of a workbook call other than input. Each is
// a warning at the key's position; a tool that does not list its keys
// (noop, host functions), or a kind toolReg does not hold (Check reports
// that), is not checked. A nil registry checks workbook calls only.
//
// Unlike Check's findings, these never make Start refuse: the playbook
// runs as written, and a NoETL playbook may carry keys meant for NoETL's
// tools.
func Lint(pb *dsl.Playbook, toolReg *tools.Registry) []dsl.Diagnostic {
	if pb == nil {
		return nil
	}
	var out []dsl.Diagnostic
	eachTask(pb, func(t *dsl.Task, what string, role taskRole) {
		known, label := lintKeys(t, role, toolReg)
		if known == nil {
			return
		}
		keys := make([]string, 0, len(t.Config))
		for k := range t.Config {
			if !slices.Contains(known, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			pos, ok := t.KeyPos[k]
			if !ok {
				pos = t.Config[k].Pos
			}
			out = append(out, dsl.Diagnostic{Pos: pos, Warning: true,
				Message: fmt.Sprintf("%s: %s has no configuration key %q (ignored)", what, label, k)})
		}
		out = append(out, lintSynonyms(t, what, label, toolReg)...)
	})
	out = append(out, lintNextCalls(pb, toolReg)...)
	out = append(out, lintPlaceholders(pb)...)
	sortByPos(out)
	return out
}

// lintNextCalls warns about the keys of a paginating retry's next_call
// that the retried task's tool does not read: next_call overrides the
// task's configuration for the next page, so such a key (paramz for
// params) changes nothing and the same page is fetched until max_attempts.
func lintNextCalls(pb *dsl.Playbook, toolReg *tools.Registry) []dsl.Diagnostic {
	var out []dsl.Diagnostic
	seen := map[dsl.Pos]bool{} // a step's retry serves each of its tasks
	check := func(t *dsl.Task, r *dsl.Retry, what string, role taskRole) {
		if r == nil {
			return
		}
		if t.Kind == "workbook" {
			// A call's next_call overrides the called action's
			// configuration (runAction hands it to the action's tool),
			// not the call's input. A call of no action is Check's.
			if t.Target == nil {
				return
			}
			t, role = t.Target, roleAction
		}
		known, label := lintKeys(t, role, toolReg)
		if known == nil {
			return
		}
		for _, rule := range r.Rules {
			for _, k := range sortedKeys(rule.NextCall) {
				pos := rule.NextCall[k].Pos
				if slices.Contains(known, k) || seen[pos] {
					continue
				}
				seen[pos] = true
				out = append(out, dsl.Diagnostic{Pos: pos, Warning: true,
					Message: fmt.Sprintf("%s: retry next_call: %s has no configuration key %q (ignored)", what, label, k)})
			}
		}
	}
	for _, s := range pb.Workflow {
		for _, t := range s.Tool {
			what := "step " + s.Name
			if t.Name != "" {
				what += ": task " + t.Name
			}
			check(t, retryOf(s, t), what, roleTool)
		}
	}
	for _, t := range pb.Workbook {
		check(t, t.Retry, "workbook action "+t.Name, roleAction)
	}
	return out
}

// lintPlaceholders warns about %(name)s placeholders in a SQL cursor's
// statements that name nothing the statement gets: the loop's scope
// (workload keys, step results, ctx, vars, args), the rows' keys, rows
// and reason, and the slot and frame variables. A typo there fails every
// claim, ack or release at run time; a failed release stops the loop.
func lintPlaceholders(pb *dsl.Playbook) []dsl.Diagnostic {
	known := map[string]bool{}
	for _, n := range []string{"keys", "rows", "reason", "__worker_slot_id", "__worker_slot_index", "__frame_max_rows",
		"workload", "ctx", "vars", "execution_id", "parent_execution_id", "args", "input", "iter", "loop_index"} {
		known[n] = true
	}
	for k := range pb.Workload {
		known[k] = true
	}
	for _, s := range pb.Workflow {
		known[s.Name] = true
		for k := range s.Args {
			known[k] = true
		}
		for _, a := range s.Set {
			// A ctx key is a top-level name too (oneStore).
			ns, rest := splitNamespace(a.Path)
			if ns != "ctx" && ns != "iter" {
				rest = a.Path
			}
			root, _, _ := strings.Cut(rest, ".")
			known[root] = true
		}
	}
	var out []dsl.Diagnostic
	for _, s := range pb.Workflow {
		if s.Loop == nil || s.Loop.Cursor == nil || !dsl.IsSQLCursor(s.Loop.Cursor.Kind) {
			continue
		}
		c := s.Loop.Cursor
		check := func(field, stmt string, pos dsl.Pos) {
			for _, name := range sqlcursor.Placeholders(stmt) {
				if !known[name] {
					out = append(out, dsl.Diagnostic{Pos: pos, Warning: true, Message: fmt.Sprintf(
						"step %s: loop.cursor.%s: placeholder %%(%s)s names no variable the statement gets (keys, rows, a workload key, ...)", s.Name, field, name)})
				}
			}
		}
		if c.Claim != nil {
			check("claim", c.Claim.Source, c.Claim.Pos)
		}
		for _, field := range sortedKeys(c.Options) {
			v := c.Options[field]
			if sql := v.Get("sql"); sql != nil {
				v = sql // the {sql, params} form
			}
			if t := v.Template(); t != nil {
				check(field, t.Source, v.Pos)
			} else if src, ok := v.Raw().(string); ok {
				check(field, src, v.Pos)
			}
		}
	}
	return out
}

// lintKeys returns the keys a task's configuration may hold, and how
// messages name what reads them; nil when its keys are open.
func lintKeys(t *dsl.Task, role taskRole, toolReg *tools.Registry) ([]string, string) {
	if t.Kind == "workbook" {
		// callTarget takes the call's input and nothing else.
		return []string{"input"}, "a workbook call"
	}
	if role == roleSink && t.Kind == "postgres" && t.Config["table"] != nil &&
		t.Config["command"] == nil && t.Config["query"] == nil && t.Config["sql"] == nil {
		// A table sink: runSink builds the SQL and hands the tool only
		// the credential.
		return []string{"table", "mode", "key", "data", "auth", "credential"}, "a postgres table sink"
	}
	if toolReg == nil {
		return nil, ""
	}
	tool, err := toolReg.Lookup(t.Kind)
	if err != nil {
		return nil, ""
	}
	keys, ok := tools.ConfigKeys(tool)
	if !ok {
		return nil, ""
	}
	// name labels a task; a single tool also gets it (dsl), read or not.
	keys = append(slices.Clip(keys), "name")
	if role == roleAction {
		// runAction hands the tool the call's rendered inputs as input.
		keys = append(keys, "input")
	}
	return keys, "tool kind " + t.Kind
}

// lintSynonyms warns about each key of task t that the tool would read,
// but for a synonym set before it in the tool's order (endpoint after
// url, sql after command): accepted, and of no effect on the call.
func lintSynonyms(t *dsl.Task, what, label string, toolReg *tools.Registry) []dsl.Diagnostic {
	if !strings.HasPrefix(label, "tool kind ") {
		return nil // a workbook call or a table sink: no tool reads the keys
	}
	tool, err := toolReg.Lookup(t.Kind)
	if err != nil {
		return nil
	}
	var out []dsl.Diagnostic
	for _, group := range tools.ConfigSynonyms(tool) {
		first := ""
		for _, k := range group {
			if v, set := t.Config[k]; !set || v.Raw() == nil {
				continue // a key set to null is absent to the tools
			}
			if first == "" {
				first = k
				continue
			}
			pos, ok := t.KeyPos[k]
			if !ok {
				pos = t.Config[k].Pos
			}
			out = append(out, dsl.Diagnostic{Pos: pos, Warning: true,
				Message: fmt.Sprintf("%s: %s reads %s before %s: %s is ignored", what, label, first, k, k)})
		}
	}
	return out
}

// LintCursors warns of cursor loops whose settings lose rows on a fault
// given what their driver (looked up in reg) guarantees, of cursor
// options the driver does not read, of loops that leave frame.max_rows
// at its default of one row a frame, and of frame bounds that process:
// frame does not read. Like Lint's findings, these never make Start
// refuse.
//
// A source with leases of its own (cursor.Features.LeaseExpiry: redis
// streams, NATS consumers, ...) counts a delivery when it hands a row out,
// and cannot tell one that ran from one whose claim was lost before the
// engine recorded it (a worker killed or stalled just after its claim).
// With max_attempts 1, the row's only delivery is then spent, and the
// claim that takes it back dead-letters it without its body ever running.
func LintCursors(pb *dsl.Playbook, reg *cursor.Registry) []dsl.Diagnostic {
	if pb == nil || reg == nil {
		return nil
	}
	var out []dsl.Diagnostic
	for _, s := range pb.Workflow {
		if s.Loop == nil || s.Loop.Cursor == nil {
			continue
		}
		cs := s.Loop.Cursor
		driver, err := reg.Lookup(cs.Kind)
		if err != nil {
			continue
		}
		out = append(out, lintCursorOptions(s.Name, cs, driver)...)
		out = append(out, lintMaxRows(s, cs)...)
		out = append(out, lintFrameProcess(s)...)
		if !driver.Features().LeaseExpiry {
			continue
		}
		attempts := s.Loop.Frame.MaxAttempts
		if cs.MaxAttempts > 0 {
			attempts = cs.MaxAttempts
		}
		if attempts == 1 && s.Loop.Frame.Templates["max_attempts"] == nil {
			out = append(out, dsl.Diagnostic{Pos: cs.Pos, Warning: true, Message: fmt.Sprintf(
				"step %s: max_attempts 1 on a %s cursor: the source counts every delivery, a claim lost before it was recorded "+
					"(a worker killed or stalled after its claim) among them, so its rows would be dead-lettered without running; "+
					"give max_attempts 2 or more", s.Name, cs.Kind)})
		}
	}
	return out
}

// lintMaxRows warns of cursor loop s whose frame block leaves max_rows
// unset: each frame then claims one row (NoETL's default), so every row
// pays a claim, its commit and three events of its own, which a frame of
// many rows shares among them (README, "Tuning a cursor drain": 0.62 of
// the raw SQL's rate, against 0.89 with 100 rows a frame). A SQL claim
// that does not read __frame_max_rows sets its own batch, and is left
// alone.
func lintMaxRows(s *dsl.Step, cs *dsl.CursorSpec) []dsl.Diagnostic {
	if _, written := s.Loop.Frame.KeyPos["max_rows"]; written {
		return nil
	}
	if cs.Claim != nil && !slices.Contains(cs.Claim.Names(), "__frame_max_rows") {
		return nil
	}
	return []dsl.Diagnostic{{Pos: cs.Pos, Warning: true, Message: fmt.Sprintf(
		"step %s: loop.spec.frame.max_rows is not set, so every frame claims one row (NoETL's default) and each row pays a claim, "+
			"its commit and three events of its own; set max_rows (100, say) to claim rows in batches", s.Name)}}
}

// lintFrameProcess warns of the frame bounds that process: frame does not
// read: the frame's rows go to one call of its tool chain, so
// row_concurrency (rows run at once) and max_seconds (no row starts once
// the frame has run that long) change nothing there. row_concurrency 1
// is what a frame call does anyway, and is not warned of.
func lintFrameProcess(s *dsl.Step) []dsl.Diagnostic {
	f := s.Loop.Frame
	if f.Process != dsl.ProcessFrame {
		return nil
	}
	var out []dsl.Diagnostic
	for _, b := range [...]struct {
		key, why string
		set      bool // written with a value that would matter under process: row
	}{
		{"row_concurrency", "whose rows go to one call of the tool (ignored); use process: row to run rows at once", f.RowConcurrency > 1},
		{"max_seconds", "whose rows start together in one call (ignored); bound the call with the step's spec.timeout", f.MaxSeconds > 0},
	} {
		if pos, ok := f.KeyPos[b.key]; ok && (b.set || f.Templates[b.key] != nil) {
			out = append(out, dsl.Diagnostic{Pos: pos, Warning: true, Message: fmt.Sprintf(
				"step %s: loop.spec.frame.%s has no effect with process: frame, %s", s.Name, b.key, b.why)})
		}
	}
	return out
}

// lintCursorOptions warns about the options of cursor block cs that its
// driver does not read, when the driver lists what it reads
// (cursor.OptionKeyLister): the driver ignores them, so a typo (relase
// for release, steam for stream) would change nothing, silently. url is
// the engine's own (the credential a block without auth names).
func lintCursorOptions(step string, cs *dsl.CursorSpec, driver cursor.Driver) []dsl.Diagnostic {
	l, ok := driver.(cursor.OptionKeyLister)
	if !ok {
		return nil
	}
	known := append(l.OptionKeys(), "url")
	var out []dsl.Diagnostic
	for _, k := range sortedKeys(cs.Options) {
		if slices.Contains(known, k) {
			continue
		}
		pos, ok := cs.KeyPos[k]
		if !ok {
			pos = cs.Options[k].Pos
		}
		out = append(out, dsl.Diagnostic{Pos: pos, Warning: true, Message: fmt.Sprintf(
			"step %s: loop.cursor: a %s cursor has no option %q (ignored)", step, cs.Kind, k)})
	}
	return out
}
