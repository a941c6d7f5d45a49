package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// validPlaybook is valid with warnings: a tool kind this build does not
// register (a host may), an unreachable step, and a hint field (a note).
const validPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: ok}
workflow:
  - step: start
    tool: {kind: snowflake}
    loop:
      in: [1]
      iterator: x
  - step: island
    tool: {kind: noop}
    output:
      store: {kind: kv, ttl: 1h}
`

// refusedPlaybook parses, but run refuses it: an unknown key and a field
// this build does not honour.
const refusedPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: refused}
workflow:
  - step: start
    tool: {kind: noop}
    surprise: 1
    loop:
      aggregate: {}
      in: [1]
      iterator: x
`

const invalidPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: bad}
workflow:
  - step: start
    next: [nowhere]
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runValidate(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = dispatch(append([]string{"validate"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidateCommand(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "good.yaml", validPlaybook)
	bad := writeFile(t, "bad.yaml", invalidPlaybook)
	refused := writeFile(t, "refused.yaml", refusedPlaybook)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string // exact stdout lines
		wantErr  string   // substring of stderr
	}{
		{
			name: "valid, with warnings", args: []string{good}, wantCode: 0,
			wantOut: []string{
				good + `:6:11: warning: step start: tool kind "snowflake" is not registered in this engine (refused at run)`,
				good + `:10:5: warning: step island is unreachable from start`,
				"ok " + good,
			},
		},
		{
			name: "valid verbose", args: []string{"-v", good}, wantCode: 0,
			wantOut: []string{
				good + `:6:11: warning: step start: tool kind "snowflake" is not registered in this engine (refused at run)`,
				good + `:10:5: warning: step island is unreachable from start`,
				good + `:13:25: note: step island: step.output.store.ttl is a hint: ttl, compression, bucket, ...: NoETL's tiers; the engine has one result store`,
				"ok " + good,
			},
		},
		{
			// What every build refuses at run fails validate too, so that
			// validate can gate a playbook before it runs.
			name: "what run refuses", args: []string{refused}, wantCode: 1,
			wantOut: []string{
				refused + `:7:5: step start: unknown key "surprise" (refused at run)`,
				refused + `:9:7: step start: loop.aggregate is not supported by this build: NoETL's loop result reducer is not implemented; the loop's result is NoETL's default aggregate {results, stats} (refused at run)`,
			},
		},
		{
			name: "invalid lists every problem", args: []string{bad}, wantCode: 1,
			wantOut: []string{
				bad + ":5:5: step start: tool is required",
				bad + `:6:12: step start: next step "nowhere" does not exist`,
			},
		},
		{
			name: "mixed", args: []string{good, bad}, wantCode: 1,
			wantOut: []string{
				good + `:6:11: warning: step start: tool kind "snowflake" is not registered in this engine (refused at run)`,
				good + `:10:5: warning: step island is unreachable from start`,
				"ok " + good,
				bad + ":5:5: step start: tool is required",
				bad + `:6:12: step start: next step "nowhere" does not exist`,
			},
		},
		{name: "missing file", args: []string{good + ".absent"}, wantCode: 1, wantOut: []string{good + ".absent: dsl: read playbook: open " + good + ".absent: no such file or directory"}},
		{name: "no files", args: nil, wantCode: 2, wantErr: "no playbook files given"},
		{name: "unknown flag", args: []string{"-x", good}, wantCode: 2, wantErr: "flag provided but not defined: -x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runValidate(tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if got := lines(out); tt.wantOut != nil && !slices.Equal(got, tt.wantOut) {
				t.Errorf("stdout:\n%s\nwant:\n%s", out, strings.Join(tt.wantOut, "\n"))
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.wantErr)
			}
		})
	}
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := dispatch(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage: cursorflow") {
		t.Errorf("no command: code %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := dispatch([]string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: code %d, stderr %q", code, errOut.String())
	}
	if code := dispatch([]string{"help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "validate") {
		t.Errorf("help: code %d, stdout %q", code, out.String())
	}
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// corpus returns the NoETL playbooks: valid ones and broken ones. It skips
// when the corpus is absent locally and fails under CI=true.
func corpus(t *testing.T) (valid, broken []string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "noetl-playbooks"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NoETL corpus missing at %s", dir)
		}
		t.Skipf("NoETL corpus not present at %s", dir)
	}
	err = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		if strings.Contains(filepath.ToSlash(path), "/broken_playbooks/") {
			broken = append(broken, path)
		} else {
			valid = append(valid, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return valid, broken
}

// TestValidateBinary builds the real command and runs it over the corpus.
func TestValidateBinary(t *testing.T) {
	t.Parallel()
	valid, broken := corpus(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("go toolchain not on PATH")
		}
		t.Skip("go toolchain not on PATH")
	}
	bin := filepath.Join(t.TempDir(), "cursorflow")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		out, err := cmd.Output()
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return exitErr.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}

	code, out := run(append([]string{"validate"}, valid...)...)
	if code != 0 {
		t.Fatalf("valid corpus: exit %d\n%s", code, out)
	}
	oks := 0
	for _, l := range lines(out) {
		switch {
		case strings.HasPrefix(l, "ok "):
			oks++
		case strings.Contains(l, "refused at run") || !strings.Contains(l, ": warning: "):
			t.Errorf("valid corpus: run would refuse a playbook: %s", l)
		}
	}
	if oks != len(valid) {
		t.Errorf("valid corpus: %d ok lines for %d files:\n%s", oks, len(valid), out)
	}

	code, out = run(append([]string{"validate"}, append(valid, broken...)...)...)
	if code != 1 {
		t.Errorf("with broken playbook: exit %d, want 1", code)
	}
	for _, b := range broken {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(b) + `:\d+:\d+: \S`).MatchString(out) {
			t.Errorf("no file:line:col error for %s in:\n%s", b, out)
		}
	}
	if !strings.Contains(out, "should_error_tool_is_required.yaml:39:5: step end: tool is required\n") {
		t.Errorf("missing the corpus' tool-is-required error:\n%s", out)
	}
	if code, _ := run("validate"); code != 2 {
		t.Errorf("no files: exit %d, want 2", code)
	}
}

// TestValidateSubPlaybookPaths: validate warns about a sub-playbook task
// whose path names no file next to the playbook, or a child that run
// would refuse, and is quiet about a good child.
func TestValidateSubPlaybookPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, src := range map[string]string{
		"parent.yaml": "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p}\nworkflow:\n" +
			"  - step: start\n    tool: {kind: playbook, path: ./chld.yaml}\n    next: [two]\n" +
			"  - step: two\n    tool: {kind: playbook, path: refused.yaml}\n    next: [three]\n" +
			"  - step: three\n    tool: {kind: playbook, path: good.yaml}\n",
		"refused.yaml": refusedPlaybook,
		"good.yaml":    "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: g}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	parent := filepath.Join(dir, "parent.yaml")
	code, out, _ := runValidate(parent)
	got := lines(out)
	want := []string{
		parent + ":6:34: warning: step start: sub-playbook " + filepath.Join(dir, "chld.yaml") + ": no such file or directory (run fails this step)",
		parent + ":9:34: warning: step two: sub-playbook " + filepath.Join(dir, "refused.yaml") + " would be refused (run fails this step): " +
			filepath.Join(dir, "refused.yaml") + `:7:5: step start: unknown key "surprise" (refused at run)`,
		"ok " + parent,
	}
	if code != 0 || !slices.Equal(got, want) {
		t.Fatalf("exit %d, stdout:\n%s\nwant:\n%s", code, out, strings.Join(want, "\n"))
	}
}

// TestValidateWarnsOfOneDeliveryOnLeasedSources: validate warns of
// max_attempts 1 on a cursor whose source counts deliveries (a claim lost
// before it was recorded spends one, and the row would be dead-lettered
// unrun), wherever the playbook sets it, and not on a source that does
// not count a lost claim (postgres rolls it back) or with 2 attempts.
func TestValidateWarnsOfOneDeliveryOnLeasedSources(t *testing.T) {
	t.Parallel()
	pb := func(kind, cursorExtra, frame string) string {
		return `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: drain}
workflow:
  - step: start
    loop:
      cursor:
        kind: ` + kind + `
        auth: q
        stream: jobs` + cursorExtra + `
      iterator: job
      spec:
        mode: cursor
        frame: ` + frame + `
    tool: {kind: noop}
`
	}
	for _, tc := range []struct {
		name, src string
		warn      bool
	}{
		{"redis, frame max_attempts 1", pb("redisstream", "", "{max_rows: 10, max_attempts: 1}"), true},
		{"nats, cursor max_attempts 1", pb("natsconsumer", "\n        max_attempts: 1", "{max_rows: 10}"), true},
		{"redis, max_attempts 2", pb("redisstream", "", "{max_rows: 10, max_attempts: 2}"), false},
		{"redis, default", pb("redisstream", "", "{max_rows: 10}"), false},
		{"postgres, max_attempts 1", strings.Replace(pb("postgres", "", "{max_rows: 10, max_attempts: 1}"), "stream: jobs", "claim: SELECT 1 AS id", 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "drain.yaml", tc.src)
			var out, errOut bytes.Buffer
			if code := dispatch([]string{"validate", path}, &out, &errOut); code != exitOK {
				t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
			}
			got := strings.Contains(out.String(), "max_attempts 1 on a") && strings.Contains(out.String(), "dead-lettered without running")
			if got != tc.warn {
				t.Fatalf("warned %v, want %v:\n%s", got, tc.warn, out.String())
			}
		})
	}
}

// TestValidateRefusesUnrecordableStepNames: a step name the event log
// cannot record (over engine.MaxStepNameLen bytes), which run refuses,
// makes validate fail too, naming the step's position. Before, validate
// said ok and only run refused it.
func TestValidateRefusesUnrecordableStepNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("s", 1100)
	path := writeFile(t, "long.yaml", `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: long}
workflow:
  - step: start
    tool: {kind: noop}
    next: [`+long+`]
  - step: `+long+`
    tool: {kind: noop}
`)
	var out, errOut bytes.Buffer
	code := dispatch([]string{"validate", path}, &out, &errOut)
	if code != exitInvalid || !strings.Contains(out.String(), "long.yaml:8:") || !strings.Contains(out.String(), "step name is 1100 bytes, more than 1024") ||
		strings.Contains(out.String(), "ok ") {
		t.Fatalf("exit %d, stdout %s stderr %s: want the step name refused at 8", code, out.String(), errOut.String())
	}
}

// TestValidateSubPlaybookArgKeys: validate warns about a key a
// sub-playbook call passes (args, workload or input) that the child's
// workload block lacks: a typo (numbrs for numbers) reached the child as
// a key it never read, and the child ran on its default, silently.
func TestValidateSubPlaybookArgKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	child := filepath.Join(dir, "child.yaml")
	if err := os.WriteFile(child, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: child}
workload: {numbers: [], factor: 1}
workflow:
  - step: start
    tool: {kind: noop, total: "{{ (numbers | sum) * factor }}"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	parent := filepath.Join(dir, "parent.yaml")
	if err := os.WriteFile(parent, []byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: parent}
workflow:
  - step: start
    tool:
      kind: playbook
      path: ./child.yaml
      args:
        numbrs: [1, 2]
        factor: 10
      workload: {factr: 3}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runValidate(parent)
	want := []string{
		parent + ":10:17: warning: step start: sub-playbook " + child + ": its workload has no key numbrs, which the call passes under args (its keys: factor, numbers)",
		parent + ":12:25: warning: step start: sub-playbook " + child + ": its workload has no key factr, which the call passes under workload (its keys: factor, numbers)",
	}
	for _, w := range want {
		if !strings.Contains(out+errOut, w+"\n") {
			t.Errorf("validate lacks %q\nexit %d\nstdout %s\nstderr %s", w, code, out, errOut)
		}
	}
	if strings.Contains(out+errOut, "key factor,") {
		t.Errorf("validate warns about factor, a key of the child's workload:\n%s%s", out, errOut)
	}
}
