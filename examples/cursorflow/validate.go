package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

// cmdValidate implements `cursorflow validate [-v] FILE...`.
func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "also print notes: fields accepted as hints, and what this build does instead")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cursorflow validate [-v] FILE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "cursorflow validate: no playbook files given")
		fs.Usage()
		return exitUsage
	}
	treg, creg, closer := lintRegistries()
	defer closer.Close()
	code := exitOK
	for _, path := range fs.Args() {
		if !validateFile(path, *verbose, stdout, func(pb *dsl.Playbook) []dsl.Diagnostic {
			// What Start refuses beyond Check is refused here too.
			pb.Refusals = append(pb.Refusals, engine.UnrecordableStepNames(pb)...)
			return slices.Concat(engine.Check(pb, treg, creg), engine.Lint(pb, treg), engine.LintCursors(pb, creg), subPlaybooks(pb, path))
		}) {
			code = exitInvalid
		}
	}
	return code
}

// validateFile reports on one playbook and says whether it is valid.
// Fields every build refuses at run (pb.Refusals: unknown keys, fields
// this engine does not honour) make it invalid, as parse errors do, so
// that validate can gate what run would refuse. Warnings (tool or cursor
// kinds this build does not register, which a host may, and the lint)
// are always printed; notes on hint fields only when verbose.
func validateFile(path string, verbose bool, out io.Writer, check func(*dsl.Playbook) []dsl.Diagnostic) bool {
	pb, err := dsl.ParseFile(path)
	var errs dsl.ErrorList
	if err != nil && !errors.As(err, &errs) {
		// Not a parse problem: the file could not be read.
		fmt.Fprintf(out, "%s: %v\n", path, err)
		return false
	}
	diags := make([]*dsl.Diagnostic, 0, len(errs))
	diags = append(diags, errs...)
	refusals := map[dsl.Diagnostic]bool{}
	if pb != nil {
		refused := check(pb) // may add to pb.Refusals
		for _, d := range pb.Refusals {
			refusals[d] = true
		}
		seen := make(map[dsl.Diagnostic]bool, len(refused))
		for i := range refused {
			seen[refused[i]] = true
			diags = append(diags, &refused[i])
		}
		for i := range pb.Warnings {
			if !seen[pb.Warnings[i]] {
				diags = append(diags, &pb.Warnings[i])
			}
		}
		if verbose {
			for i := range pb.Notes {
				diags = append(diags, &pb.Notes[i])
			}
		}
	}
	slices.SortStableFunc(diags, func(a, b *dsl.Diagnostic) int { return a.Pos.Compare(b.Pos) })
	notes := map[*dsl.Diagnostic]bool{}
	if pb != nil {
		for i := range pb.Notes {
			notes[&pb.Notes[i]] = true
		}
	}
	refusedAtRun := false
	for _, d := range diags {
		switch {
		case refusals[*d]:
			refusedAtRun = true
			fmt.Fprintln(out, d.Error())
		case notes[d]:
			fmt.Fprintf(out, "%s: note: %s\n", d.Pos, d.Message)
		case d.Warning:
			fmt.Fprintf(out, "%s: warning: %s\n", d.Pos, d.Message)
		default:
			fmt.Fprintln(out, d.Error())
		}
	}
	if len(errs) > 0 || refusedAtRun {
		return false
	}
	fmt.Fprintf(out, "ok %s\n", path)
	return true
}

// subPlaybooks warns about a sub-playbook task (kind: playbook) whose path,
// as written, names no file next to the playbook at file, or a file that
// does not parse: run would fail the step that calls it. A templated path
// is left to run time. For a child that parses it warns too about each key
// the call passes that the child's workload lacks (childArgKeys).
func subPlaybooks(pb *dsl.Playbook, file string) []dsl.Diagnostic {
	var out []dsl.Diagnostic
	check := func(t *dsl.Task, what string) {
		if t == nil || t.Kind != "playbook" {
			return
		}
		v := t.Config["path"]
		if v == nil {
			v = t.Config["playbook"]
		}
		if v == nil || !v.IsConstant() {
			return
		}
		child, _ := v.Raw().(string)
		if child == "" {
			return
		}
		child = playbook.ChildPath(file, child)
		if _, err := os.Stat(child); err != nil {
			out = append(out, dsl.Diagnostic{Pos: v.Pos, Warning: true,
				Message: fmt.Sprintf("%s: sub-playbook %s: %v (run fails this step)", what, child, errors.Unwrap(err))})
			return
		}
		cpb, err := dsl.ParseFile(child)
		if err == nil && len(cpb.Refusals) > 0 {
			err = &cpb.Refusals[0]
		}
		if err != nil {
			out = append(out, dsl.Diagnostic{Pos: v.Pos, Warning: true,
				Message: fmt.Sprintf("%s: sub-playbook %s would be refused (run fails this step): %v", what, child, err)})
			return
		}
		out = append(out, childArgKeys(t, cpb, child, what)...)
	}
	for _, s := range pb.Workflow {
		for _, t := range s.Tool {
			check(t, "step "+s.Name)
		}
	}
	for _, t := range pb.Workbook {
		check(t, "workbook action "+t.Name)
	}
	return out
}

// childArgKeys warns about each key a sub-playbook task passes to its
// child (under workload, args or input, merged into the child's workload)
// that the child's workload block does not hold: a typo (numbrs for
// numbers) reaches the child as a key it does not read, and the child runs
// on its own default, silently. A child may read a key it does not
// declare, so this only warns; a child without a workload block is not
// checked (as the workload lint does not check one).
func childArgKeys(t *dsl.Task, cpb *dsl.Playbook, child, what string) []dsl.Diagnostic {
	if cpb.Workload == nil {
		return nil
	}
	var out []dsl.Diagnostic
	for _, under := range []string{"workload", "args", "input"} {
		m := t.Config[under]
		for _, key := range m.Keys() {
			if _, ok := cpb.Workload[key]; ok {
				continue
			}
			out = append(out, dsl.Diagnostic{Pos: m.Get(key).Pos, Warning: true,
				Message: fmt.Sprintf("%s: sub-playbook %s: its workload has no key %s, which the call passes under %s (its keys: %s)",
					what, child, key, under, strings.Join(slices.Sorted(maps.Keys(cpb.Workload)), ", "))})
		}
	}
	return out
}

// lintRegistries returns the tools and drivers a local run registers (code
// tools on, a sub-playbook tool that runs nothing): validate and run
// --server check kinds and keys against them.
func lintRegistries() (*tools.Registry, *cursor.Registry, io.Closer) {
	treg, creg, closer := stdwire.Registries(nil, slog.New(slog.DiscardHandler), true)
	_ = treg.Register("playbook", playbook.New(nil))
	return treg, creg, closer
}

// playbookWarnings returns what validate warns about in pb (the parser's
// warnings, the lint, cursor option typos, sub-playbook calls), sorted
// by position: run prints them on stderr before it starts, so that a
// field with no effect (a cursor's marc: for mark:) is said where the
// playbook runs, not only where it is validated.
func playbookWarnings(pb *dsl.Playbook, file string, treg *tools.Registry, creg *cursor.Registry) []dsl.Diagnostic {
	var out []dsl.Diagnostic
	seen := map[dsl.Diagnostic]bool{}
	for _, d := range slices.Concat(pb.Warnings, engine.Lint(pb, treg), engine.LintCursors(pb, creg), subPlaybooks(pb, file)) {
		if d.Warning && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b dsl.Diagnostic) int { return a.Pos.Compare(b.Pos) })
	return out
}

// printWarnings writes playbookWarnings to w, one "FILE:LINE:COL:
// warning: ..." line each.
func printWarnings(w io.Writer, pb *dsl.Playbook, file string, treg *tools.Registry, creg *cursor.Registry) {
	for _, d := range playbookWarnings(pb, file, treg, creg) {
		fmt.Fprintf(w, "%s: warning: %s\n", d.Pos, d.Message)
	}
}
