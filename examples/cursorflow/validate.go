package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/cursorflow/cursorflow/dsl"
)

// cmdValidate implements `cursorflow validate [-v] FILE...`.
func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "also print warnings (unknown keys, unreachable steps, ...)")
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
	code := exitOK
	for _, path := range fs.Args() {
		if !validateFile(path, *verbose, stdout) {
			code = exitInvalid
		}
	}
	return code
}

// validateFile reports on one playbook and says whether it is valid.
func validateFile(path string, verbose bool, out io.Writer) bool {
	pb, err := dsl.ParseFile(path)
	var errs dsl.ErrorList
	if err != nil && !errors.As(err, &errs) {
		// Not a parse problem: the file could not be read.
		fmt.Fprintf(out, "%s: %v\n", path, err)
		return false
	}
	diags := make([]*dsl.Diagnostic, 0, len(errs))
	diags = append(diags, errs...)
	if verbose && pb != nil {
		for i := range pb.Warnings {
			diags = append(diags, &pb.Warnings[i])
		}
	}
	slices.SortStableFunc(diags, func(a, b *dsl.Diagnostic) int {
		if c := cmp.Compare(a.Pos.Line, b.Pos.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Pos.Col, b.Pos.Col)
	})
	for _, d := range diags {
		if d.Warning {
			fmt.Fprintf(out, "%s: warning: %s\n", d.Pos, d.Message)
		} else {
			fmt.Fprintln(out, d.Error())
		}
	}
	if len(errs) > 0 {
		return false
	}
	fmt.Fprintf(out, "ok %s\n", path)
	return true
}
