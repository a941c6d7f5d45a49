package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSetDottedKey: --set config.limit=9 sets the key inside the
// workload's config mapping and keeps its other keys, instead of adding a
// top-level key "config.limit" that no template reads.
func TestSetDottedKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pb := filepath.Join(dir, "set.yaml")
	if err := os.WriteFile(pb, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: set_dotted}
workload:
  config: {limit: 5, name: x}
  "odd.key": 1
workflow:
  - step: start
    tool:
      kind: noop
      spec:
        policy:
          rules:
            - when: '{{ config.limit != 9 or config.name != "x" or config.retry.max != 2 or workload["odd.key"] != 3 or "config.limit" in workload }}'
              then: {do: fail}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	args := []string{"run", pb, "--eventlog", "memory:", "--progress", "never",
		"--set", "config.limit=9", "--set", "config.retry.max=2", "--set", "odd.key=3"}
	if code := dispatch(args, &out, &errOut); code != exitOK {
		t.Fatalf("run exited %d: %s %s", code, out.String(), errOut.String())
	}

	// A dotted key below a workload value that is not a mapping is refused.
	out.Reset()
	errOut.Reset()
	args = []string{"run", pb, "--eventlog", "memory:", "--progress", "never", "--set", "config.name.first=y"}
	if code := dispatch(args, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "config.name") {
		t.Fatalf("run exited %d: %s %s", code, out.String(), errOut.String())
	}
}

// TestSetValue: a --set value is a YAML scalar or flow collection, and any
// other text stays exactly as given: a message with ": " in it is not a
// mapping, "- a" is not a list, " #12" is not a comment.
func TestSetValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want any
	}{
		{"7", int64(7)},
		{"2.5", 2.5},
		{"true", true},
		{"null", nil},
		{"", nil},
		{"[1, 2]", []any{int64(1), int64(2)}},
		{"{a: 1}", map[string]any{"a": int64(1)}},
		{`"quoted: yes"`, "quoted: yes"},
		{"'007'", "007"},
		{"Error: disk full", "Error: disk full"},
		{"- a", "- a"},
		{"fix #12", "fix #12"},
		{"a: [1]", "a: [1]"},
		{"no", "no"},
		{"[unclosed", "[unclosed"},
		{"2024-01-02", "2024-01-02"},
		{`"a"b`, `"a"b`},
		{".inf", ".inf"},
		{"9223372036854775808", "9223372036854775808"},
		{"02139", "02139"},
		{"0755", "0755"},
		{"-3", int64(-3)},
		{"1e3", 1000.0},
		{"false", false},
	}
	for _, tt := range tests {
		if got := setValue(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("setValue(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
}

// TestSetUnknownKeyWarns: a --set key the playbook's workload lacks (a
// typo: regoin for region) is said on stderr, naming the key and the
// workload's keys, and the run goes on with it added. It used to be added
// in silence, and the run read the workload's own value.
func TestSetUnknownKeyWarns(t *testing.T) {
	t.Parallel()
	pb := filepath.Join(t.TempDir(), "set.yaml")
	if err := os.WriteFile(pb, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: set_unknown}
workload:
  region: eu
  order: {id: 1, amount: 5}
workflow:
  - step: start
    tool: {kind: noop, r: "{{ region }}"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	args := []string{"run", pb, "--eventlog", "memory:", "--progress", "never",
		"--set", "regoin=us", "--set", "order.amont=7", "--set", "region=us", "--set", "order.amount=6"}
	if code := dispatch(args, &out, &errOut); code != exitOK {
		t.Fatalf("run exited %d: %s %s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		"cursorflow: warning: --set regoin: the playbook's workload has no key regoin (its keys: order, region); the run adds it\n",
		"cursorflow: warning: --set order.amont: workload order has no key amont (its keys: amount, id); the run adds it\n",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if n := strings.Count(errOut.String(), "warning: --set"); n != 2 {
		t.Errorf("%d --set warnings, want 2 (region and order.amount are keys of the workload):\n%s", n, errOut.String())
	}
}
