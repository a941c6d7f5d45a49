package dsl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse. Parse must never panic, and
// must return either a playbook with no error or an ErrorList whose every
// entry is a positioned, non-warning diagnostic.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/noetl/*.yaml")
	if dir := filepath.Join(moduleRoot(f), "..", "shared", "noetl-playbooks"); dirExists(dir) {
		seeds = append(seeds, corpusFiles(f, dir)...)
	}
	for _, path := range seeds {
		src, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Add([]byte("workflow: []"))
	f.Add([]byte("workflow:\n- step: start\n  tool: {kind: noop}\n  next: [start]\n"))
	f.Add([]byte("workflow: [{step: start, kind: workbook, name: t}]\nworkbook: [{name: t, kind: x}]"))
	f.Add([]byte("workload: &a [*a]\nworkflow: [{step: start, tool: {kind: noop}}]"))
	f.Add([]byte("a: &a [*a, *a, *a]\nb: &b [*a, *a, *a]\nworkflow: *b"))
	f.Add([]byte("workflow:\n- step: start\n  tool: {<<: {kind: x}, <<: [{a: 1}]}\n  loop: {cursor: {kind: postgres}, spec: {frame: {max_rows: 1e400}}}"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Parse("fuzz.yaml", src)
		if err == nil {
			if p == nil {
				t.Fatal("nil playbook without error")
			}
			if p.Step(StartStep) == nil {
				t.Fatal("valid playbook without a start step")
			}
			return
		}
		var el ErrorList
		if !errors.As(err, &el) || len(el) == 0 {
			t.Fatalf("error is not a non-empty ErrorList: %v", err)
		}
		for _, d := range el {
			if d.Warning || d.Pos.Line < 1 || d.Pos.File != "fuzz.yaml" {
				t.Fatalf("bad diagnostic %+v", d)
			}
		}
	})
}

func dirExists(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}
