package dsl

import (
	"os"
	"strings"
	"testing"
)

//go:generate go run ./internal/genfields ../docs/playbook-fields.md

// TestFieldsDocIsGenerated keeps docs/playbook-fields.md equal to what
// FieldsMarkdown renders from the table (regenerate with go generate).
func TestFieldsDocIsGenerated(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../docs/playbook-fields.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := FieldsMarkdown(); string(got) != want {
		t.Fatal("docs/playbook-fields.md is stale: run go generate ./dsl")
	}
}

// TestFieldsTable checks the table itself: paths unique, every entry has a
// note, refused entries say why.
func TestFieldsTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, f := range Fields {
		if seen[f.Path] {
			t.Errorf("duplicate path %s", f.Path)
		}
		seen[f.Path] = true
		if f.Support == 0 || f.Support > Refused {
			t.Errorf("%s: no support level", f.Path)
		}
		if f.Support != Descriptive && strings.TrimSpace(f.Note) == "" {
			t.Errorf("%s: %s needs a note", f.Path, f.Support)
		}
	}
	for path, want := range map[string]Support{
		"step.loop":                      Honoured,
		"playbook.metadata.labels":       Descriptive,
		"playbook.executor.profile":      Descriptive,
		"task.url":                       Honoured,
		"loop.aggregate":                 Refused,
		"step.output.store.kind":         Hint,
		"loop.spec.max_in_flight":        Honoured,
		"sink.table":                     Honoured,
		"keychain.scope":                 Descriptive,
		"playbook.executor.spec.foo.bar": Descriptive,
	} {
		f := LookupField(path)
		if f == nil || f.Support != want {
			t.Errorf("LookupField(%q) = %+v, want %s", path, f, want)
		}
	}
	for _, path := range []string{"step.colour", "loop.spec.exotic", "nothing"} {
		if f := LookupField(path); f != nil {
			t.Errorf("LookupField(%q) = %+v, want nil (unknown)", path, f)
		}
	}
}

// TestCorpusRefusesNothing: every valid playbook of NoETL's visible corpus
// uses only fields this build honours (or documents, or takes as hints).
func TestCorpusRefusesNothing(t *testing.T) {
	t.Parallel()
	for _, path := range corpusFiles(t, corpusDir(t)) {
		if strings.Contains(path, "broken_playbooks") {
			continue
		}
		pb, err := ParseFile(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		for _, r := range pb.Refusals {
			t.Errorf("%s", r.Error())
		}
	}
}
