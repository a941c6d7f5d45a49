package dsl

import (
	"reflect"
	"strings"
	"testing"
)

// TestYAML11Bools: unquoted yes/no/on/off values are the booleans NoETL's
// PyYAML loader reads them as, each with a warning; quoted or tagged ones,
// y and n, and keys stay text.
func TestYAML11Bools(t *testing.T) {
	t.Parallel()
	p, err := Parse("y11.yaml", []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: y11}
workload:
  enabled: no
  verbose: Off
  quoted: 'no'
  tagged: !!str yes
  short: y
  zip: 02139
  mode: 0755
  list: [ON, off, "on"]
  on: 1
workflow:
  - step: start
    tool: {kind: noop}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"enabled": false, "verbose": false, "quoted": "no", "tagged": "yes", "short": "y", "zip": "02139", "mode": int64(493),
		"list": []any{true, false, "on"}, "on": int64(1)}
	if !reflect.DeepEqual(p.Workload, want) {
		t.Errorf("workload = %#v, want %#v", p.Workload, want)
	}
	want4 := []string{"y11.yaml:5:12: warning: no is read as false", "y11.yaml:6:12: warning: Off is read as false",
		"y11.yaml:12:10: warning: ON is read as true", "y11.yaml:12:14: warning: off is read as false"}
	for i, w := range p.Warnings {
		if i < len(want4) && !strings.HasPrefix(w.Pos.String()+": warning: "+w.Message, want4[i]) {
			t.Errorf("warning %d = %q, want %q...", i, w.Pos.String()+": "+w.Message, want4[i])
		}
	}
	if len(p.Warnings) != 4 {
		t.Errorf("want 4 warnings, got %v", p.Warnings)
	}
}

// TestAPIVersionWarning: anything but noetl.io/v2 is warned about, as the
// table of fields says.
func TestAPIVersionWarning(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"noetl.io/v1", "example.org/v2"} {
		p, err := Parse("v.yaml", []byte("apiVersion: "+v+"\nkind: Playbook\nmetadata: {name: v}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if !hasWarning(p, "unexpected apiVersion") {
			t.Errorf("%s: no warning in %v", v, p.Warnings)
		}
	}
}
