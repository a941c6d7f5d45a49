package dsl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// header is the preamble of the small playbooks in these tests; the first
// workflow step starts on line 6.
const header = `apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: t
workflow:
`

// pb wraps steps (written at column 1 of a list) into a playbook.
func pb(steps string) string { return header + steps }

func mustParse(t *testing.T, src string) *Playbook {
	t.Helper()
	p, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: unexpected error:\n%v", err)
	}
	return p
}

func parseErrors(t *testing.T, src string) ErrorList {
	t.Helper()
	_, err := Parse("t.yaml", []byte(src))
	if err == nil {
		t.Fatalf("Parse: want errors, got none")
	}
	var el ErrorList
	if !errors.As(err, &el) {
		t.Fatalf("Parse: error %T is not an ErrorList: %v", err, err)
	}
	return el
}

func hasWarning(p *Playbook, substr string) bool {
	for _, w := range p.Warnings {
		if w.Warning && strings.Contains(w.Message, substr) {
			return true
		}
	}
	return false
}

// moduleRoot finds the directory holding go.mod above the test's directory.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// corpusDir returns the NoETL playbook corpus, skipping the test when it is
// absent locally (failing under CI=true).
func corpusDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(moduleRoot(t), "..", "shared", "noetl-playbooks")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NoETL corpus missing at %s: %v", dir, err)
		}
		t.Skipf("NoETL corpus not present at %s", dir)
	}
	return dir
}

func corpusFiles(t testing.TB, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestCorpus parses every NoETL playbook: the valid ones without errors,
// the broken one with positioned errors.
func TestCorpus(t *testing.T) {
	t.Parallel()
	dir := corpusDir(t)
	files := corpusFiles(t, dir)
	if len(files) < 20 {
		t.Fatalf("corpus holds %d playbooks, want at least 20", len(files))
	}
	sawBroken := false
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		t.Run(rel, func(t *testing.T) {
			p, err := ParseFile(f)
			if strings.HasPrefix(filepath.ToSlash(rel), "broken_playbooks/") {
				sawBroken = true
				var el ErrorList
				if !errors.As(err, &el) || len(el) == 0 {
					t.Fatalf("broken playbook accepted (err = %v)", err)
				}
				for _, d := range el {
					if d.Pos.File != f || d.Pos.Line < 1 || d.Pos.Col < 1 {
						t.Errorf("error without a file:line:col position: %q", d.Error())
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("valid playbook rejected:\n%v", err)
			}
			if p.Step(StartStep) == nil {
				t.Fatal("no start step in index")
			}
			for _, s := range p.Workflow {
				if p.Step(s.Name) != s {
					t.Errorf("Step(%q) does not return the step", s.Name)
				}
			}
		})
	}
	if !sawBroken {
		t.Error("corpus has no broken_playbooks/ entry")
	}
}

func TestBrokenPlaybookMessage(t *testing.T) {
	t.Parallel()
	_, err := ParseFile("testdata/noetl/should_error_tool_is_required.yaml")
	var el ErrorList
	if !errors.As(err, &el) {
		t.Fatalf("want ErrorList, got %v", err)
	}
	want := "testdata/noetl/should_error_tool_is_required.yaml:39:5: step end: tool is required"
	if len(el) != 1 || el[0].Error() != want {
		t.Fatalf("errors:\n%v\nwant exactly:\n%s", err, want)
	}
}

func TestParseFileMissing(t *testing.T) {
	t.Parallel()
	_, err := ParseFile("testdata/does-not-exist.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want fs.ErrNotExist, got %v", err)
	}
}

func TestTopLevel(t *testing.T) {
	t.Parallel()
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: demo
  path: examples/demo
  description: A demo
  version: "2"
  labels: {team: data}
workload:
  api_url: http://x
  n: 3
  ratio: 0.5
  on: true
  none: null
  list: [1, "two", {three: 3}]
vars:
  greeting: "hello {{ api_url }}"
keychain:
  - name: pg
    kind: postgres
    scope: global
workbook:
  - name: ping
    kind: http
    url: http://x
unknown_top:
  profile: auto
workflow:
  - step: start
    tool: {kind: noop}
`
	p := mustParse(t, src)
	if p.APIVersion != "noetl.io/v2" || p.Kind != "Playbook" || p.File != "t.yaml" {
		t.Errorf("header = %q %q %q", p.APIVersion, p.Kind, p.File)
	}
	wantMeta := Metadata{Name: "demo", Path: "examples/demo", Description: "A demo",
		Extra: map[string]any{"version": "2", "labels": map[string]any{"team": "data"}}}
	if !reflect.DeepEqual(p.Metadata, wantMeta) {
		t.Errorf("metadata = %#v", p.Metadata)
	}
	wantWorkload := map[string]any{
		"api_url": "http://x", "n": int64(3), "ratio": 0.5, "on": true, "none": nil,
		"list": []any{int64(1), "two", map[string]any{"three": int64(3)}},
	}
	if !reflect.DeepEqual(p.Workload, wantWorkload) {
		t.Errorf("workload = %#v", p.Workload)
	}
	if v := p.Vars["greeting"]; v == nil || v.Raw() != "hello {{ api_url }}" {
		t.Errorf("vars = %#v", p.Vars)
	}
	if len(p.Keychain) != 1 || p.Keychain[0].Name != "pg" || p.Keychain[0].Kind != "postgres" ||
		!reflect.DeepEqual(p.Keychain[0].Fields, map[string]any{"scope": "global"}) || p.Keychain[0].Pos.Line != 19 {
		t.Errorf("keychain = %#v", p.Keychain[0])
	}
	if task := p.WorkbookTask("ping"); task == nil || task.Kind != "http" || task.Config["url"].Raw() != "http://x" {
		t.Errorf("workbook task = %#v", task)
	}
	if !hasWarning(p, `playbook: unknown key "unknown_top"`) {
		t.Errorf("no refusal for unknown_top: %v", p.Warnings)
	}
	if len(p.Refusals) != 1 || p.Refusals[0].Pos.Line != 26 || p.Refusals[0].Pos.Col != 1 {
		t.Errorf("refusals = %v, want one at line 26 col 1", p.Refusals)
	}
}

func TestStepFields(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  desc: first
  when: "{{ enabled }}"
  args:
    a: 1
  input:
    b: "{{ a }}"
  vars:
    v: x
  set:
    ctx.z: 3
    ctx.a: '{{ output.data }}'
    iter.m: m
  spec:
    timeout: 30s
    on_error: continue
    custom: 7
  tool:
    kind: http
    url: "{{ api }}/x"
    auth: token
    spec:
      timeout: 2.5
    set:
      ctx.t: 1
  flavour: mint
`))
	s := p.Step("start")
	if s == nil || s.Desc != "first" || s.Pos != (Pos{File: "t.yaml", Line: 6, Col: 3}) {
		t.Fatalf("step = %#v", s)
	}
	if s.When == nil || s.When.Source != "{{ enabled }}" || s.When.Pos.Line != 8 || s.When.Pos.Col != 10 {
		t.Errorf("when = %#v", s.When)
	}
	if len(s.Args) != 2 || s.Args["a"].Raw() != int64(1) || s.Args["b"].Raw() != "{{ a }}" {
		t.Errorf("args = %#v", s.Args)
	}
	if s.Vars["v"].Raw() != "x" {
		t.Errorf("vars = %#v", s.Vars)
	}
	var paths []string
	for _, a := range s.Set {
		paths = append(paths, a.Path)
	}
	if !reflect.DeepEqual(paths, []string{"ctx.z", "ctx.a", "iter.m"}) || s.Set[0].Pos.Line != 16 || s.Set[0].Value.Raw() != int64(3) {
		t.Errorf("set = %v (first at %v)", paths, s.Set[0].Pos)
	}
	if s.Spec.Timeout != 30*time.Second || s.Spec.OnError != "continue" || s.Spec.Extra["custom"] != int64(7) {
		t.Errorf("spec = %#v", s.Spec)
	}
	if len(s.Tool) != 1 || s.Pipeline {
		t.Fatalf("tool = %#v", s.Tool)
	}
	tool := s.Tool[0]
	if tool.Kind != "http" || tool.Name != "" || tool.Timeout != 2500*time.Millisecond || len(tool.Set) != 1 ||
		len(tool.Config) != 2 || tool.Config["url"].Raw() != "{{ api }}/x" || tool.Config["auth"].Raw() != "token" {
		t.Errorf("tool = %#v", tool)
	}
	if s.Extra["flavour"] == nil || !hasWarning(p, `unknown key "flavour" (refused at run)`) || !hasWarning(p, `spec: unknown key "custom"`) {
		t.Errorf("extra = %#v warnings = %v", s.Extra, p.Warnings)
	}
}

func TestArgsInputConflict(t *testing.T) {
	t.Parallel()
	el := parseErrors(t, pb(`- step: start
  args: {a: 1}
  input: {a: 2}
  tool: {kind: noop}
`))
	if len(el) != 1 || !strings.Contains(el[0].Message, `argument "a" is set in both args and input`) || el[0].Pos.Line != 8 {
		t.Fatalf("errors = %v", el)
	}
}

func TestPipeline(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool:
    - name: fetch
      kind: http
      url: http://x
      timeout: 8
      spec:
        policy:
          rules:
            - when: "{{ output.status == 'error' }}"
              then: {do: jump, to: save}
    - save:
        kind: postgres
        command: select 1
`))
	s := p.Step("start")
	if !s.Pipeline || len(s.Tool) != 2 {
		t.Fatalf("tool = %#v", s.Tool)
	}
	if s.Tool[0].Name != "fetch" || s.Tool[0].Config["timeout"].Raw() != int64(8) || s.Tool[0].Timeout != 0 {
		t.Errorf("task 0 = %#v", s.Tool[0])
	}
	if s.Tool[1].Name != "save" || s.Tool[1].Kind != "postgres" || s.Tool[1].Config["command"].Raw() != "select 1" {
		t.Errorf("task 1 (name-keyed shorthand) = %#v", s.Tool[1])
	}
	if r := s.Tool[0].Policy.Rules[0]; r.Then.Do != DoJump || r.Then.To != "save" {
		t.Errorf("rule = %#v", r)
	}
}

func TestWorkbookStep(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
workbook:
  - name: ping
    kind: http
    url: http://x
    spec:
      timeout: 5
      policy:
        rules:
          - else: {then: {do: continue}}
    set:
      ctx.pinged: true
workflow:
  - step: start
    kind: workbook
    name: ping
    next: second
  - step: second
    kind: workbook
    task: ping
`)
	if s := p.Step("start"); s.Kind != "workbook" || s.TaskName != "ping" || len(s.Tool) != 0 {
		t.Errorf("start = %#v", s)
	}
	if s := p.Step("second"); s.TaskName != "ping" {
		t.Errorf("second = %#v", s)
	}
	task := p.WorkbookTask("ping")
	if task.Timeout != 5*time.Second || task.Policy == nil || !task.Policy.Rules[0].Else || len(task.Set) != 1 {
		t.Errorf("task = %#v", task)
	}
}

func TestNextForms(t *testing.T) {
	t.Parallel()
	tail := `- step: a
  tool: {kind: noop}
- step: b
  tool: {kind: noop}
`
	tests := []struct {
		name, next string
		wantMode   string
		wantArcs   []string
		check      func(t *testing.T, n *Next)
	}{
		{
			name: "router",
			next: `
    spec: {mode: inclusive, on_no_match: quiet}
    arcs:
      - step: a
        when: "{{ x }}"
        set: {ctx.k: 1}
        args: {p: 2}
      - step: b`,
			wantMode: NextInclusive, wantArcs: []string{"a", "b"},
			check: func(t *testing.T, n *Next) {
				a := n.Arcs[0]
				if n.OnNoMatch != "quiet" || a.When == nil || a.When.Source != "{{ x }}" || len(a.Set) != 1 || a.Args["p"].Raw() != int64(2) {
					t.Errorf("arc = %#v", a)
				}
				if a.Pos.Line != 11 || a.Pos.Col != 15 {
					t.Errorf("arc pos = %v, want line 11 col 15", a.Pos)
				}
				if n.Arcs[1].When != nil {
					t.Errorf("unguarded arc has when")
				}
			},
		},
		{
			name:     "list of arcs",
			next:     "\n    - step: a\n      when: '{{ y }}'\n      args: {q: 1}\n    - {step: b}",
			wantMode: NextExclusive, wantArcs: []string{"a", "b"},
		},
		{name: "list of names", next: " [a, b]", wantMode: NextExclusive, wantArcs: []string{"a", "b"}},
		{name: "one name", next: " b", wantMode: NextExclusive, wantArcs: []string{"b"}},
		{name: "single arc mapping", next: " {step: a, when: '{{ z }}'}", wantMode: NextExclusive, wantArcs: []string{"a"}},
		{name: "v1 mode", next: "\n    mode: inclusive\n    arcs: [a]", wantMode: NextInclusive, wantArcs: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, pb("- step: start\n  tool: {kind: noop}\n  next:"+tt.next+"\n"+tail))
			n := p.Step("start").Next
			if n == nil {
				t.Fatal("next is nil")
			}
			var got []string
			for _, a := range n.Arcs {
				got = append(got, a.Step)
			}
			if n.Mode != tt.wantMode || !reflect.DeepEqual(got, tt.wantArcs) {
				t.Errorf("mode %q arcs %v, want %q %v", n.Mode, got, tt.wantMode, tt.wantArcs)
			}
			if tt.check != nil {
				tt.check(t, n)
			}
		})
	}
	if n := mustParse(t, pb("- step: start\n  tool: {kind: noop}\n")).Step("start").Next; n != nil {
		t.Errorf("absent next = %#v, want nil", n)
	}
}

func TestLoops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, loop string
		want       func(l *Loop) bool
	}{
		{
			name: "collection defaults",
			loop: "in: '{{ items }}'\n    iterator: item",
			want: func(l *Loop) bool {
				return l.In != nil && l.In.Raw() == "{{ items }}" && l.Iterator == "item" && l.Mode == ModeSequential &&
					l.MaxInFlight == 0 && l.Cursor == nil &&
					reflect.DeepEqual(l.Frame, FrameSpec{MaxRows: 1, RowConcurrency: 1, LeaseSeconds: 60, HeartbeatSeconds: 6, Process: ProcessRow, MaxAttempts: 3})
			},
		},
		{
			name: "literal list, parallel",
			loop: "in: [1, 2, 3]\n    iterator: n\n    spec: {mode: parallel, max_in_flight: 5}",
			want: func(l *Loop) bool {
				return reflect.DeepEqual(l.In.Raw(), []any{int64(1), int64(2), int64(3)}) && l.Mode == ModeParallel && l.MaxInFlight == 5
			},
		},
		{
			name: "v1 mode directly under loop",
			loop: "in: '{{ xs }}'\n    iterator: x\n    mode: parallel\n    max_in_flight: 2",
			want: func(l *Loop) bool { return l.Mode == ModeParallel && l.MaxInFlight == 2 },
		},
		{
			name: "cursor full",
			loop: `cursor:
      kind: postgres
      auth: pg
      claim: "UPDATE q SET s = 1 LIMIT {{ __frame_max_rows }} RETURNING id"
      table: q
    iterator: row
    spec:
      max_in_flight: 4
      policy:
        rules:
          - else: {then: {do: continue}}
      frame:
        max_rows: 50
        row_concurrency: 2
        lease_seconds: 120
        heartbeat_seconds: 30
        max_seconds: 30
        max_bytes: 67108864
        process: frame
        max_attempts: 5`,
			want: func(l *Loop) bool {
				c := l.Cursor
				// KeyPos says where each frame key was written (max_rows on
				// the block's first line).
				f, at := l.Frame, l.Frame.KeyPos
				f.KeyPos = nil
				return l.In == nil && l.Mode == ModeCursor && l.MaxInFlight == 4 && l.Policy != nil &&
					c != nil && c.Kind == "postgres" && c.Auth.Raw() == "pg" && c.Claim != nil &&
					strings.Contains(c.Claim.Source, "__frame_max_rows") && c.Options["table"].Raw() == "q" &&
					reflect.DeepEqual(f, FrameSpec{MaxRows: 50, RowConcurrency: 2, LeaseSeconds: 120, HeartbeatSeconds: 30,
						MaxSeconds: 30, MaxBytes: 67108864, Process: ProcessFrame, MaxAttempts: 5}) &&
					len(at) == 8 && at["max_rows"] == Pos{File: "t.yaml", Line: 21, Col: 9} && at["max_attempts"].Line == 28
			},
		},
		{
			name: "cursor credential, no claim for stream kinds, heartbeat default",
			loop: "cursor: {kind: redisstream, credential: r, stream: jobs}\n    iterator: msg\n    spec: {frame: {lease_seconds: 90}}",
			want: func(l *Loop) bool {
				return l.Cursor.Claim == nil && l.Cursor.Auth.Raw() == "r" && l.Mode == ModeCursor &&
					l.Frame.LeaseSeconds == 90 && l.Frame.HeartbeatSeconds == 9
			},
		},
		{
			name: "cursor max_attempts and reclaim_after",
			loop: "cursor: {kind: postgres, auth: pg, claim: 'SELECT 1', max_attempts: 4, reclaim_after: 5m, dead_letter: 'UPDATE q SET s = 2'}\n    iterator: r",
			want: func(l *Loop) bool {
				c := l.Cursor
				return c.MaxAttempts == 4 && c.ReclaimAfter == 5*time.Minute && c.Options["max_attempts"] == nil &&
					c.Options["reclaim_after"] == nil && c.Options["dead_letter"] != nil &&
					l.Frame.MaxAttempts == 4 && l.Frame.LeaseSeconds == 60 && l.Frame.HeartbeatSeconds == 6
			},
		},
		{
			name: "reclaim_after bounds the lease, frame max_attempts wins",
			loop: "cursor: {kind: redisstream, stream: s, max_attempts: 4, reclaim_after: 20}\n    iterator: r\n    spec: {frame: {lease_seconds: 120, max_attempts: 7}}",
			want: func(l *Loop) bool {
				return l.Cursor.MaxAttempts == 4 && l.Frame.MaxAttempts == 7 && l.Frame.LeaseSeconds == 20 && l.Frame.HeartbeatSeconds == 2
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, pb("- step: start\n  tool: {kind: noop}\n  loop:\n    "+tt.loop+"\n"))
			l := p.Step("start").Loop
			if l == nil || !tt.want(l) {
				t.Errorf("loop = %#v (cursor %#v)", l, l.Cursor)
			}
		})
	}
}

func TestPolicyForms(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool:
    kind: http
    spec:
      policy:
        rules:
          - when: "{{ output.status == 'error' }}"
            then:
              do: retry
              attempts: 5
              backoff: exponential
              delay: 0.5
          - when: "{{ a }}"
            then: {do: retry, delay: 2}
          - when: "{{ b }}"
            then: {do: retry}
          - when: "{{ c }}"
            then: {do: jump, to: start, set: {iter.page: 2}}
          - else:
            then:
              do: continue
              set:
                ctx.done: true
  spec:
    policy:
      admit:
        rules:
          - when: "{{ enabled }}"
            then: {allow: true}
      rules:
        - else:
            then: {do: fail}
`))
	s := p.Step("start")
	rules := s.Tool[0].Policy.Rules
	if len(rules) != 5 {
		t.Fatalf("rules = %d", len(rules))
	}
	want := []Action{
		{Do: DoRetry, Attempts: 5, Backoff: BackoffExponential, Delay: 500 * time.Millisecond},
		{Do: DoRetry, Attempts: 3, Backoff: BackoffFixed, Delay: 2 * time.Second},
		{Do: DoRetry, Attempts: 3, Backoff: BackoffNone},
		{Do: DoJump, To: "start", Backoff: BackoffNone},
		{Do: DoContinue, Backoff: BackoffNone},
	}
	for i, r := range rules {
		got := r.Then
		got.Set, got.Pos = nil, Pos{}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("rule %d action = %#v, want %#v", i, got, want[i])
		}
	}
	if rules[0].When == nil || rules[0].Else || !rules[4].Else || rules[4].When != nil {
		t.Errorf("when/else flags wrong")
	}
	// The `- else:` / sibling `then:` slip keeps its set block.
	if set := rules[4].Then.Set; len(set) != 1 || set[0].Path != "ctx.done" || set[0].Value.Raw() != true {
		t.Errorf("else rule set = %#v", set)
	}
	if sp := s.Spec.Policy; sp == nil || len(sp.Rules) != 1 || sp.Rules[0].Then.Do != DoFail {
		t.Errorf("step policy = %#v", sp)
	}
	if a := s.Spec.Admit; a == nil || len(a.Rules) == 0 || a.Rules[0].Then.Allow == nil {
		t.Errorf("admit not decoded: %#v (warnings %v)", s.Spec.Admit, p.Warnings)
	}
}

func TestCanonicalExample(t *testing.T) {
	t.Parallel()
	p, err := ParseFile("testdata/noetl/v10_canonical_example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	transform := p.Step("process_data").Tool[1]
	if transform.Name != "transform" || transform.Policy == nil || len(transform.Policy.Rules) != 1 {
		t.Fatalf("transform = %#v", transform)
	}
	r := transform.Policy.Rules[0]
	if !r.Else || r.Then.Do != DoContinue || len(r.Then.Set) != 1 || r.Then.Set[0].Path != "ctx.transform_done" {
		t.Errorf("malformed else rule = %#v", r)
	}
	if got := p.Step("store_results").Loop; got.Mode != ModeParallel || got.MaxInFlight != 5 {
		t.Errorf("loop = %#v", got)
	}
	if p.Metadata.Extra["version"] != "10.0" {
		t.Errorf("metadata extra = %#v", p.Metadata.Extra)
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"30": 30 * time.Second, "1.5": 1500 * time.Millisecond, `"45s"`: 45 * time.Second,
		"2m": 2 * time.Minute, `"10"`: 10 * time.Second, "0": 0, "null": 0,
	} {
		p := mustParse(t, pb("- step: start\n  tool: {kind: noop}\n  spec: {timeout: "+in+"}\n"))
		if got := p.Step("start").Spec.Timeout; got != want {
			t.Errorf("timeout %s = %v, want %v", in, got, want)
		}
	}
}

func TestAnchorsAndMerge(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
workload:
  base: &base {url: "http://x", method: GET}
workflow:
  - step: start
    tool:
      <<: *base
      kind: http
      method: POST
    next: [other]
  - step: other
    tool: {kind: http, defaults: *base}
`)
	cfg := p.Step("start").Tool[0].Config
	if cfg["url"].Raw() != "http://x" || cfg["method"].Raw() != "POST" {
		t.Errorf("merged config = %v / %v", cfg["url"].Raw(), cfg["method"].Raw())
	}
	if !reflect.DeepEqual(p.Step("other").Tool[0].Config["defaults"].Raw(), map[string]any{"url": "http://x", "method": "GET"}) {
		t.Errorf("alias value = %#v", p.Step("other").Tool[0].Config["defaults"].Raw())
	}
}

func TestWarningsDoNotFail(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    in: [1]
    iterator: i
    colour: red
    spec: {frame: {max_rows: 2}, exotic: 1}
  next:
    spec: {mode: exclusive, extra: 1}
    arcs: [{step: start, data: 1}]
- step: island
  tool: {kind: noop}
`))
	for _, w := range []string{`loop: unknown key "colour"`, `loop.spec: unknown key "exotic"`, "frame only applies to cursor loops",
		`next.spec: unknown key "extra"`, `next arc: unknown key "data"`, "step island is unreachable"} {
		if !hasWarning(p, w) {
			t.Errorf("missing warning %q in %v", w, p.Warnings)
		}
	}
	for i := 1; i < len(p.Warnings); i++ {
		if p.Warnings[i-1].Pos.Compare(p.Warnings[i].Pos) > 0 {
			t.Errorf("warnings not sorted by position: %v", p.Warnings)
		}
	}
}

func TestStepSpecPool(t *testing.T) {
	pb, err := Parse("pool.yaml", []byte("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: x}\nworkflow:\n  - step: start\n    spec: {pool: gpu}\n    tool: {kind: noop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := pb.Step("start").Spec.Pool; got != "gpu" {
		t.Fatalf("Spec.Pool = %q, want gpu", got)
	}
	if len(pb.Warnings) != 0 {
		t.Fatalf("spec.pool is a known key, got warnings %v", pb.Warnings)
	}
}

// TestCursorKnobs: max_attempts and reclaim_after on a SQL cursor without
// a dead_letter statement warn at their position; a reclaim_after no
// longer than the heartbeat is refused with file:line:col; a negative
// max_attempts too.
func TestCursorKnobs(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    iterator: r
    cursor:
      kind: postgres
      auth: pg
      claim: SELECT 1
      max_attempts: 3
`))
	if !hasWarning(p, "cursor.max_attempts without a dead_letter statement") {
		t.Errorf("no warning about max_attempts without dead_letter: %v", p.Warnings)
	} else if w := p.Warnings[0]; w.Pos.Line != 14 || w.Pos.Col != 7 {
		t.Errorf("warning at %v, want line 14 col 7", w.Pos)
	}
	p = mustParse(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    iterator: r
    cursor: {kind: redisstream, stream: s, max_attempts: 3, reclaim_after: 30s}
`))
	if len(p.Warnings) != 0 {
		t.Errorf("a stream cursor's knobs warned: %v", p.Warnings)
	}
	el := parseErrors(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    iterator: r
    cursor: {kind: redisstream, stream: s, reclaim_after: 5}
    spec: {frame: {heartbeat_seconds: 5}}
- step: other
  tool: {kind: noop}
  loop:
    iterator: r
    cursor: {kind: redisstream, stream: s, max_attempts: -1}
`))
	for _, want := range []string{"t.yaml:10:13: step start: cursor reclaim_after (5s) must be longer than frame heartbeat_seconds (5)",
		"t.yaml:16:58: step other: cursor.max_attempts must not be negative"} {
		if !strings.Contains(el.Error(), want) {
			t.Errorf("errors %v, want %q", el, want)
		}
	}
	if len(el) != 2 {
		t.Errorf("%d errors, want 2: %v", len(el), el)
	}
}

// TestCursorKnobsWithTemplatedFrame: a templated lease_seconds is
// rendered at run and then capped by reclaim_after, and its heartbeat
// defaults to the rendered lease/HeartbeatsPerLease; a templated
// frame.max_attempts beats the cursor's; a templated heartbeat that
// reaches reclaim_after fails naming the field; the knobs themselves must
// be literals (they are read at parse).
func TestCursorKnobsWithTemplatedFrame(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    iterator: r
    cursor: {kind: redisstream, stream: s, max_attempts: 4, reclaim_after: 30}
    spec:
      frame: {lease_seconds: '{{ lease }}', max_attempts: '{{ tries }}'}
`))
	f := p.Step("start").Loop.Frame
	for _, tc := range []struct {
		lease, wantLease, wantBeat float64
		tries                      int64
	}{{120, 30, 3, 7}, {10, 10, 1, 2}} {
		r, err := f.Resolve(map[string]any{"lease": tc.lease, "tries": tc.tries})
		if err != nil {
			t.Fatalf("lease %v: %v", tc.lease, err)
		}
		if r.LeaseSeconds != tc.wantLease || r.HeartbeatSeconds != tc.wantBeat || r.MaxAttempts != int(tc.tries) {
			t.Errorf("lease %v rendered to lease %v heartbeat %v max_attempts %d, want %v %v %d",
				tc.lease, r.LeaseSeconds, r.HeartbeatSeconds, r.MaxAttempts, tc.wantLease, tc.wantBeat, tc.tries)
		}
	}

	p = mustParse(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    iterator: r
    cursor: {kind: redisstream, stream: s, max_attempts: 4, reclaim_after: 30}
    spec: {frame: {heartbeat_seconds: '{{ beat }}'}}
`))
	f = p.Step("start").Loop.Frame
	if f.MaxAttempts != 4 || f.LeaseSeconds != 30 {
		t.Errorf("frame max_attempts %d lease %v, want the cursor's 4 and reclaim_after's 30", f.MaxAttempts, f.LeaseSeconds)
	}
	r, err := f.Resolve(map[string]any{"beat": 2.5})
	if err != nil || r.HeartbeatSeconds != 2.5 || r.LeaseSeconds != 30 {
		t.Errorf("heartbeat 2.5 rendered to %+v, %v", r, err)
	}
	_, err = f.Resolve(map[string]any{"beat": 30})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "loop.spec.frame.heartbeat_seconds" || !strings.Contains(err.Error(), "reclaim_after (30s)") {
		t.Errorf("heartbeat 30 under reclaim_after 30: %v, want a FieldError naming heartbeat_seconds and reclaim_after", err)
	}

	el := parseErrors(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    iterator: r
    cursor: {kind: redisstream, stream: s, max_attempts: '{{ n }}', reclaim_after: '{{ r }}'}
`))
	for _, want := range []string{"t.yaml:10:58: step start: cursor.max_attempts must be a literal (template loop.spec.frame.max_attempts instead)",
		"t.yaml:10:84: step start: cursor.reclaim_after must be a literal (template loop.spec.frame.lease_seconds instead)"} {
		if !strings.Contains(el.Error(), want) {
			t.Errorf("errors %v, want %q", el, want)
		}
	}
}

func TestStepSpecWorkerLabels(t *testing.T) {
	pb, err := Parse("labels.yaml", []byte("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: x}\nworkflow:\n  - step: start\n    spec: {pool: gpu, worker_labels: {zone: eu, gpus: 2}}\n    tool: {kind: noop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := pb.Step("start").Spec.WorkerLabels; !reflect.DeepEqual(got, map[string]string{"zone": "eu", "gpus": "2"}) {
		t.Fatalf("Spec.WorkerLabels = %v", got)
	}
	if len(pb.Warnings) != 0 {
		t.Fatalf("spec.worker_labels is a known key, got warnings %v", pb.Warnings)
	}
	_, err = Parse("labels.yaml", []byte("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: x}\nworkflow:\n  - step: start\n    spec: {worker_labels: {zone: [eu, us]}}\n    tool: {kind: noop}\n"))
	if err == nil || !strings.Contains(err.Error(), "labels.yaml:6:") || !strings.Contains(err.Error(), "spec.worker_labels.zone must be a string") {
		t.Fatalf("a list as a label value: %v", err)
	}
}

func TestFanoutLoop(t *testing.T) {
	src := func(loop string) []byte {
		return []byte("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: x}\nworkflow:\n  - step: start\n    loop:\n" + loop + "    tool: {kind: noop}\n")
	}
	pb, err := Parse("f.yaml", src("      in: '{{ items }}'\n      iterator: batch\n      spec: {loop_mode: fanout, shards: 4, max_shard_retries: 2, allow_partial: true, max_in_flight: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := pb.Step("start").Loop
	if l.Mode != ModeFanout || l.Fanout != (FanoutSpec{Shards: 4, MaxShardRetries: 2, AllowPartial: true}) || l.MaxInFlight != 2 || len(pb.Warnings) != 0 {
		t.Fatalf("loop %+v, warnings %v", l, pb.Warnings)
	}
	pb, err = Parse("f.yaml", []byte("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: x}\nworkflow:\n  - step: start\n    spec: {loop_mode: fanout}\n    loop: {in: [1, 2], iterator: i, spec: {shard_size: 1}}\n    tool: {kind: noop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := pb.Step("start").Loop; l.Mode != ModeFanout || l.Fanout.ShardSize != 1 {
		t.Fatalf("step-level loop_mode: %+v", l)
	}
	for _, tc := range []struct{ loop, want string }{
		{"      in: [1]\n      iterator: i\n      spec: {loop_mode: fanout, shards: 2, shard_size: 3}\n", "shards or shard_size, not both"},
		{"      cursor: {kind: redisstream, stream: s}\n      iterator: i\n      spec: {loop_mode: fanout}\n", "needs loop.in"},
		{"      in: [1]\n      iterator: i\n      spec: {loop_mode: scatter}\n", `bad loop_mode "scatter"`},
		{"      in: [1]\n      iterator: i\n      spec: {loop_mode: fanout, shards: -1}\n", "shards"},
		{"      in: [1]\n      iterator: i\n      spec: {loop_mode: fanout, allow_partial: maybe}\n", "allow_partial must be true or false"},
	} {
		_, err := Parse("f.yaml", src(tc.loop))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "f.yaml:") {
			t.Errorf("loop %q: err %v, want %q with a position", tc.loop, err, tc.want)
		}
	}
}

// TestIterTypoWarns: a loop body that reads iter.<name> where name is not
// the iterator (a typo: iter.jb for job) renders it empty and would
// quietly match nothing; validate says so at the template. Names the loop
// sets (the iterator, _index, <iterator>_rows) and a pipeline's set: of
// iter.<name> are not flagged, nor is a step without a loop.
func TestIterTypoWarns(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  loop:
    in: [1, 2]
    iterator: job
  tool:
    - name: a
      kind: noop
      x: '{{ iter.jb.id }} {{ iter.job.id }} {{ iter._index }} {{ iter.job_rows }}'
      set:
        iter.page: '{{ 1 }}'
    - name: b
      kind: noop
      y: '{{ iter.page }} {{ iter.jb }}'
  next: [plain]
- step: plain
  tool: {kind: noop, z: '{{ iter.whatever }}'}
`))
	var got []string
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, "iter.") {
			got = append(got, w.Error())
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "iter.jb is not set by the loop (its iterator is job: iter.job)") || !strings.Contains(got[0], "t.yaml:13:") {
		t.Fatalf("iter warnings %q: want one, for iter.jb where task a reads it", got)
	}
}

// TestWorkloadTypoWarns: a template reading workload.<key> that the
// playbook's workload lacks (a typo: itemz for items) renders empty, and a
// loop over it runs nothing; validate says so, once per key. Keys the
// workload holds are not flagged, nor is a playbook without a workload.
func TestWorkloadTypoWarns(t *testing.T) {
	t.Parallel()
	steps := `- step: start
  loop:
    in: '{{ workload.itemz }}'
    iterator: x
  tool: {kind: noop, a: '{{ workload.items }} {{ workload.itemz }}'}
`
	warnings := func(p *Playbook) (got []string) {
		for _, w := range p.Warnings {
			if strings.Contains(w.Message, "workload.") {
				got = append(got, w.Error())
			}
		}
		return got
	}
	got := warnings(mustParse(t, strings.Replace(header, "workflow:", "workload: {items: [1, 2]}\nworkflow:", 1)+steps))
	if len(got) != 1 || !strings.Contains(got[0], "workload.itemz is not a key of the playbook's workload") || !strings.Contains(got[0], "t.yaml:9:") {
		t.Fatalf("workload warnings %q: want one, for workload.itemz where the loop reads it", got)
	}
	if got := warnings(mustParse(t, pb(steps))); len(got) != 0 {
		t.Fatalf("without a workload block: %q, want none", got)
	}
	// A key a set: puts in ctx is read as workload.<key> too (one store,
	// as in NoETL), from a step's set or a task policy's, and so is a
	// step's result under its name.
	set := `- step: start
  tool: {kind: noop}
  set:
    ctx.cursor: abc
    page: 2
  next: [use]
- step: use
  tool:
    - name: a
      kind: noop
      spec:
        policy:
          rules:
            - else:
                then: {do: continue, set: {ctx.total: 1}}
    - name: b
      kind: noop
      x: '{{ workload.cursor }} {{ workload.page }} {{ workload.total }} {{ workload.itemz }} {{ workload.start.status }}'
`
	got = warnings(mustParse(t, strings.Replace(header, "workflow:", "workload: {items: [1, 2]}\nworkflow:", 1)+set))
	if len(got) != 1 || !strings.Contains(got[0], "workload.itemz") {
		t.Fatalf("workload warnings %q: want one, for workload.itemz only", got)
	}
}

// TestTaskResultTypoWarns: STEP.results.TASK naming no task of pipeline
// step STEP renders empty, and an arc on it quietly takes the other
// branch; validate says so, once per name, wherever it is read (an arc's
// when, a later step's config). Named tasks, a single tool's step (whose
// data may hold results) and a loop step are not checked.
func TestTaskResultTypoWarns(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool:
    - name: fetch
      kind: noop
    - name: check
      kind: noop
  next:
    spec: {mode: exclusive}
    arcs:
      - step: more
        when: '{{ start.results.chek.more }}'
      - step: more
        when: '{{ start.results.check.more }}'
- step: more
  tool: {kind: noop, a: '{{ start.results.fetch }} {{ start.results.chek }} {{ start.results.fetched }}', b: '{{ single.results.x }}'}
  next: [single]
- step: single
  tool: {kind: noop, c: '{{ loop.results.x }}'}
  next: [loop]
- step: loop
  loop: {in: [1], iterator: i}
  tool:
    - name: only
      kind: noop
`))
	var got []string
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, ".results.") {
			got = append(got, w.Error())
		}
	}
	want := []string{
		"t.yaml:16:16: step start: start.results.chek renders empty: step start has no task named chek (its named tasks: fetch, check)",
		"t.yaml:20:",
	}
	if len(got) != 2 || got[0] != want[0] || !strings.HasPrefix(got[1], want[1]) || !strings.Contains(got[1], "start.results.fetched renders empty") {
		t.Fatalf("task result warnings:\n%s\nwant chek in the arc, fetched in step more", strings.Join(got, "\n"))
	}
}

// TestConcurrentCtxUpdateWarns: a set: that updates a ctx key from its own
// value in a task of a loop whose items run at once loses updates (each
// item reads ctx as it started); validate says so. A sequential loop, a
// parallel one bounded to one item, a set that does not read the key and
// the step's own set (run once, after loop.done) are fine.
func TestConcurrentCtxUpdateWarns(t *testing.T) {
	t.Parallel()
	const warning = "while the loop's items run at once"
	for _, tc := range []struct {
		name, spec, set string
		warn            bool
	}{
		{"parallel total", "{mode: parallel}", "ctx.total: '{{ ctx.total + iter.x }}'", true},
		{"parallel nested", "{mode: parallel, max_in_flight: 4}", "ctx.stats.n: '{{ ctx.stats.n + 1 }}'", true},
		{"sequential", "{mode: sequential}", "ctx.total: '{{ ctx.total + iter.x }}'", false},
		{"one at a time", "{mode: parallel, max_in_flight: 1}", "ctx.total: '{{ ctx.total + iter.x }}'", false},
		{"no read", "{mode: parallel}", "ctx.last: '{{ iter.x }}'", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParse(t, pb(`- step: start
  loop:
    in: [1, 2, 3]
    iterator: x
    spec: `+tc.spec+`
  tool:
    - name: add
      kind: noop
      set:
        `+tc.set+`
  set:
    ctx.after: '{{ ctx.after + 1 }}'
`))
			warned := false
			for _, w := range p.Warnings {
				warned = warned || strings.Contains(w.Message, warning)
			}
			if warned != tc.warn {
				t.Fatalf("warned %v, want %v (warnings %v)", warned, tc.warn, p.Warnings)
			}
		})
	}
}

// TestLoopStepSetReadingIterWarns: a loop step's own set: runs once after
// loop.done, where iter is empty; validate says so when it reads iter,
// and not for a task's set (per item) or a step set that does not.
func TestLoopStepSetReadingIterWarns(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  loop:
    in: [1, 2, 3]
    iterator: x
  tool:
    - name: add
      kind: noop
      set:
        ctx.last: '{{ iter.x }}'
  set:
    ctx.sum: '{{ ctx.sum + iter.x }}'
    ctx.done: '{{ true }}'
`))
	var got []string
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, "runs once, after loop.done") {
			got = append(got, w.Error())
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "set ctx.sum reads iter") {
		t.Fatalf("warnings %q: want one, for ctx.sum", got)
	}
}

// TestEndlessCycleWarns: validate warns about steps that every run goes
// round for ever (each arc of the cycle taken without a when), and not
// about cycles a condition can leave.
func TestEndlessCycleWarns(t *testing.T) {
	t.Parallel()
	const warning = "go round for ever"
	for _, tc := range []struct {
		name, steps string
		warn        bool
	}{
		{"self", `- step: start
  tool: {kind: noop}
  next: [start]
`, true},
		{"through another step", `- step: start
  tool: {kind: noop}
  next: [poll]
- step: poll
  tool: {kind: noop}
  next: [{step: start}]
`, true},
		{"inclusive", `- step: start
  tool: {kind: noop}
  next:
    spec: {mode: inclusive}
    arcs: [{step: done, when: '{{ false }}'}, {step: start}]
- step: done
  tool: {kind: noop}
`, true},
		{"a guarded arc", `- step: start
  tool: {kind: noop}
  next: [poll]
- step: poll
  tool: {kind: noop}
  next: [{step: start, when: '{{ poll.data.more }}'}]
`, false},
		{"a guarded arc first", `- step: start
  tool: {kind: noop}
  next: [{step: done, when: '{{ start.data.ready }}'}, {step: start}]
- step: done
  tool: {kind: noop}
`, false},
		{"a guarded step", `- step: start
  tool: {kind: noop}
  next: [poll]
- step: poll
  when: '{{ workload.again }}'
  tool: {kind: noop}
  next: [start]
`, false},
	} {
		p := mustParse(t, pb(tc.steps))
		if got := hasWarning(p, warning); got != tc.warn {
			t.Errorf("%s: warned %v, want %v (%v)", tc.name, got, tc.warn, p.Warnings)
		}
	}
}

// TestMetadataNameWithoutControlCharacters: a playbook name is a key in
// registries, URLs and logs; one holding a control character (a NUL, a
// newline) is refused at its position.
func TestMetadataNameWithoutControlCharacters(t *testing.T) {
	t.Parallel()
	for _, name := range []string{`"a\0b"`, `"two\nlines"`} {
		el := parseErrors(t, "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata:\n  name: "+name+"\nworkflow:\n  - step: start\n    tool: {kind: noop}\n")
		if len(el) != 1 || !strings.Contains(el[0].Error(), "t.yaml:4:9: metadata.name") {
			t.Errorf("name %s: errors %v", name, el)
		}
	}
	mustParse(t, pb("- step: start\n  tool: {kind: noop}\n")) // and a plain name passes
}

// TestNodeLimit: a playbook of more YAML nodes than maxNodes (a flow list
// of 300,000 numbers: under 2 MB of text, hundreds of MB decoded) is
// refused before it is decoded, and one of a collection loop's item limit
// (100,000 items) parses; an alias bomb is refused by its own bound.
func TestNodeLimit(t *testing.T) {
	t.Parallel()
	list := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(i))
		}
		return pb("- step: start\n  loop: {in: [" + b.String() + "], iterator: x}\n  tool: {kind: noop}\n")
	}
	_, err := Parse("t.yaml", []byte(list(300_000)))
	if err == nil || !strings.Contains(err.Error(), "more than 262144 YAML nodes") {
		t.Fatalf("300,000 items: %v, want the node limit", err)
	}
	mustParse(t, list(100_000))
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
		"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
	if _, err := Parse("t.yaml", []byte(pb("- step: start\n  tool: {kind: noop}\n")+bomb+"workload: {z: *f}\n")); err == nil || !strings.Contains(err.Error(), "aliases expand") {
		t.Fatalf("alias bomb: %v, want refused", err)
	}
}

// TestSingleToolName: a single tool's name is its label and also one of
// its keys (the secrets tool reads its alias from it); a pipeline task's
// name only labels it.
func TestSingleToolName(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool: {kind: secrets, name: mytok}
  next: [two]
- step: two
  tool:
    - name: fetch
      kind: noop
`))
	one := p.Step("start").Tool[0]
	if one.Name != "mytok" || one.Config["name"] == nil || one.Config["name"].Raw() != "mytok" {
		t.Errorf("single tool: name %q, config %v", one.Name, one.Config)
	}
	task := p.Step("two").Tool[0]
	if task.Name != "fetch" || task.Config["name"] != nil {
		t.Errorf("pipeline task: name %q, config %v", task.Name, task.Config)
	}
}

// TestLoopBounds: a lease (or heartbeat, or frame time) of more than 30
// days, which a duration of years would overflow into a negative lease,
// and more than MaxInFlight slots are refused, as literals at parse and as
// templates when they render.
func TestLoopBounds(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"spec: {mode: cursor, frame: {lease_seconds: 1e12}}",
		"spec: {mode: cursor, frame: {max_seconds: 3000000}}",
		"spec: {mode: cursor, max_in_flight: 100000}",
	} {
		el := parseErrors(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    iterator: r
    cursor: {kind: redisstream, stream: s}
    `+src+`
`))
		if len(el) != 1 || !strings.Contains(el[0].Message, "is more than") || el[0].Pos.Line != 11 {
			t.Errorf("%s: %v", src, el)
		}
	}
	p := mustParse(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    iterator: r
    cursor: {kind: redisstream, stream: s}
    spec: {mode: cursor, max_in_flight: '{{ mif }}', frame: {lease_seconds: '{{ lease }}'}}
`))
	lp := p.Step("start").Loop
	if _, err := lp.Frame.Resolve(map[string]any{"lease": 1e10}); err == nil || !strings.Contains(err.Error(), "30 days") {
		t.Errorf("a templated lease of 1e10 s: %v", err)
	}
	if _, _, err := lp.ResolveLimits(map[string]any{"mif": int64(100000)}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a templated max_in_flight of 100000: %v", err)
	}
	if _, _, err := lp.ResolveLimits(map[string]any{"mif": int64(64)}); err != nil {
		t.Errorf("max_in_flight 64: %v", err)
	}
}

// TestJumpOutOfALoopIsRefused: a policy rule of a loop's item that jumps
// to another step is refused (the engine cannot leave the loop from one
// item, and would ignore it); a jump to a task of the item's pipeline is
// fine.
func TestJumpOutOfALoopIsRefused(t *testing.T) {
	t.Parallel()
	p, _ := Parse("t.yaml", []byte(pb(`- step: start
  loop: {in: [1, 2], iterator: x}
  tool:
    - name: work
      kind: noop
      spec:
        policy:
          rules:
            - when: '{{ output.status == "error" }}'
              then: {do: jump, to: fallback}
            - when: '{{ false }}'
              then: {do: jump, to: work}
  next: [fallback]
- step: fallback
  tool: {kind: noop}
`)))
	if len(p.Refusals) != 1 || !strings.Contains(p.Refusals[0].Message, `jump to step "fallback" from a loop's item`) || p.Refusals[0].Pos.Line != 15 {
		t.Fatalf("refusals %v", p.Refusals)
	}
}

// TestArcForAnEventThatNeverComes: an arc guarded by loop.done on a step
// without a loop, or by call.done on a loop step, never matches; validate
// warns at its guard.
func TestArcForAnEventThatNeverComes(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool: {kind: noop}
  next:
    - step: looped
      when: '{{ event.name == "loop.done" }}'
- step: looped
  loop: {in: [1], iterator: x}
  tool: {kind: noop}
  next:
    - step: after
      when: "{{ 'call.done' == event.name }}"
    - step: after
      when: '{{ event.name == "loop.done" }}'
- step: after
  tool: {kind: noop}
`))
	for _, w := range []string{"the arc to looped asks for event.name loop.done, which never comes: step start has no loop",
		"the arc to after asks for event.name call.done, which never comes: step looped is a loop"} {
		if !hasWarning(p, w) {
			t.Errorf("no warning %q in %v", w, p.Warnings)
		}
	}
	n := 0
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, "never comes") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d such warnings, want 2: %v", n, p.Warnings)
	}
}

// TestArcOnCallErrorWithoutOnError: an arc guarded by call.error routes
// only where spec.on_error lets a failure route (continue, ignore);
// elsewhere the failure fails the execution, and validate warns at the
// guard.
func TestArcOnCallErrorWithoutOnError(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool: {kind: noop}
  next:
    - step: recover
      when: "{{ event.name == 'call.error' }}"
    - step: tolerant
- step: tolerant
  spec: {on_error: continue}
  tool: {kind: noop}
  next:
    - step: recover
      when: "{{ event.name == 'call.error' }}"
- step: recover
  tool: {kind: noop}
`))
	var got []string
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, "call.error") {
			got = append(got, fmt.Sprintf("%d: %s", w.Pos.Line, w.Message))
		}
	}
	want := "10: step start: the arc to recover asks for event.name call.error, which comes only with spec.on_error: continue (or ignore): without it a failure of step start fails the execution"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("call.error warnings %q, want [%q]", got, want)
	}
}

// TestCursorDeadLetterNeedsAttempts: a SQL cursor with a dead_letter
// statement whose claim's RETURNING lists no attempts column warns at
// dead_letter: the driver counts a row's deliveries only from that column,
// so a row that keeps failing is never set aside and stops the loop past
// max_attempts. The warning does not say the statement never runs: the
// engine still runs it for a frame whose lease kept expiring
// (SettleDeadLetter).
// A claim returning the column (or *), or whose rows come from a SELECT
// after its RETURNING, does not warn.
func TestCursorDeadLetterNeedsAttempts(t *testing.T) {
	t.Parallel()
	const tmpl = `- step: start
  tool: {kind: noop}
  loop:
    iterator: r
    cursor:
      kind: postgres
      auth: pg
      max_attempts: 2
      claim: |
        UPDATE q SET status = 'leased', attempts = attempts + 1
        WHERE id IN (SELECT id FROM q WHERE status = 'pending' LIMIT 5 FOR UPDATE SKIP LOCKED)
        RETURNING %s
      dead_letter: "UPDATE q SET status = 'dead' WHERE id IN %%(keys)s"
`
	p := mustParse(t, pb(fmt.Sprintf(tmpl, "id, payload")))
	const msg = "cursor.dead_letter never sets aside a row that keeps failing: the claim's RETURNING lists no attempts column"
	if !hasWarning(p, msg) {
		t.Fatalf("no warning about the claim's missing attempts column: %v", p.Warnings)
	}
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, msg) && (w.Pos.Line != 18 || w.Pos.Col != 7) {
			t.Errorf("warning at %v, want line 18 col 7 (dead_letter)", w.Pos)
		}
	}
	for _, returning := range []string{"id, ATTEMPTS", "id, n AS attempt_count", "*", "id) SELECT id, attempts FROM c",
		"q.id, q.attempts;", "{{ columns }}", `id, coalesce(attempts, 0) AS "attempts"`} {
		if p := mustParse(t, pb(fmt.Sprintf(tmpl, returning))); hasWarning(p, msg) {
			t.Errorf("RETURNING %s: warned %v", returning, p.Warnings)
		}
	}
	// The column must come back under its name: renamed, computed or
	// only in a comment, it does not.
	for _, returning := range []string{"id, attempts AS tries", "id, attempts + 1", "id -- , attempts", "id /* attempts */"} {
		if p := mustParse(t, pb(fmt.Sprintf(tmpl, returning))); !hasWarning(p, msg) {
			t.Errorf("RETURNING %s: no warning", returning)
		}
	}
}
