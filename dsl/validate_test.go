package dsl

import (
	"fmt"
	"strings"
	"testing"
)

// TestValidationErrors checks that each kind of problem is reported, with
// its position, and that nothing else is.
func TestValidationErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		// want holds "line:col: substring" for each expected error, in
		// position order.
		want []string
	}{
		{
			name: "yaml syntax",
			src:  "apiVersion: noetl.io/v2\nworkflow:\n  - step: start\n   bad: [\n",
			want: []string{"3:3: YAML syntax error: did not find expected '-' indicator"},
		},
		{
			name: "yaml tab indentation",
			src:  "workflow:\n\t- step: start\n",
			want: []string{"2:2: YAML syntax error"},
		},
		{name: "empty document", src: "# nothing\n", want: []string{"1:1: empty document"}},
		{name: "not a mapping", src: "- a\n- b\n", want: []string{"1:1: playbook must be a mapping, got a list"}},
		{name: "two documents", src: "workflow: []\n---\nx: 1\n", want: []string{"2:1: YAML syntax error: a playbook file holds one YAML document"}},
		{name: "missing workflow", src: "apiVersion: noetl.io/v2\nkind: Playbook\n", want: []string{"1:1: workflow is required"}},
		{name: "empty workflow", src: "workflow:\n", want: []string{"1:10: workflow is empty"}},
		{name: "empty workflow list", src: "workflow: []\n", want: []string{"1:11: workflow is empty"}},
		{
			name: "heartbeat not below the default lease",
			src:  pb("- step: start\n  tool: {kind: noop}\n  loop: {cursor: {kind: s3prefix}, iterator: o, spec: {frame: {heartbeat_seconds: 60}}}\n"),
			want: []string{"8:63: step start: frame heartbeat_seconds (60) must be less than lease_seconds (60)"},
		},
		{
			name: "workflow not a list",
			src:  "workflow:\n  start: {tool: {kind: noop}}\n",
			want: []string{"2:3: workflow must be a list, got a mapping"},
		},
		{
			name: "no start step",
			src:  pb("- step: begin\n  tool: {kind: noop}\n"),
			want: []string{`6:3: workflow needs a step named "start"`},
		},
		{
			name: "duplicate step and missing name",
			src:  pb("- step: start\n  tool: {kind: noop}\n- step: start\n  tool: {kind: noop}\n- tool: {kind: noop}\n"),
			want: []string{`8:3: duplicate step name "start" (first at line 6)`, "10:3: workflow step: step (its name) is required"},
		},
		{
			name: "tool required",
			src:  pb("- step: start\n  desc: nothing to run\n  next: end\n- step: end\n  desc: done\n"),
			want: []string{"6:3: step start: tool is required", "9:3: step end: tool is required"},
		},
		{
			name: "unknown next targets in every form",
			src: pb(`- step: start
  tool: {kind: noop}
  next:
    arcs:
      - step: nowhere
- step: b
  tool: {kind: noop}
  next: [gone, {step: lost}]
- step: c
  tool: {kind: noop}
  next: missing
`),
			want: []string{
				`10:15: step start: next step "nowhere" does not exist`,
				`13:10: step b: next step "gone" does not exist`,
				`13:23: step b: next step "lost" does not exist`,
				`16:9: step c: next step "missing" does not exist`,
			},
		},
		{
			name: "jump targets",
			src: pb(`- step: start
  tool:
    - name: a
      kind: noop
      spec:
        policy:
          rules:
            - else: {then: {do: jump, to: nope}}
    - name: b
      kind: noop
      spec:
        policy:
          rules:
            - else: {then: {do: jump, to: a}}
  next: [c]
- step: c
  tool:
    kind: noop
    spec:
      policy:
        rules:
          - else:
              then: {do: jump, to: a}
`),
			want: []string{
				`13:28: step start: jump target "nope" is neither a task of this pipeline nor a step`,
				`28:21: step c: jump target "a" is not a step`,
			},
		},
		{
			name: "policy actions",
			src: pb(`- step: start
  tool:
    kind: noop
    spec:
      policy:
        rules:
          - when: "{{ a }}"
            then: {do: explode}
          - when: "{{ b }}"
            then: {do: retry, backoff: random, attempts: -1, delay: -2}
          - when: "{{ c }}"
            then: {do: jump}
          - then: {do: continue}
          - when: "{{ d }}"
          - when: "{{ e }}"
            else: {then: {do: fail}}
`),
			want: []string{
				`13:19: bad do "explode"`,
				`15:40: bad backoff "random"`,
				`15:58: attempts must not be negative`,
				`15:69: delay must not be negative`,
				`17:19: do: jump needs to:`,
				`18:13: a rule needs when or else`,
				`19:13: then is required`,
				`20:13: a rule has when or else, not both`,
			},
		},
		{
			name: "task and pipeline shape",
			src: `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
workbook:
  - name: w
    url: http://x
  - kind: http
workflow:
  - step: start
    tool:
      - name: a
        kind: noop
      - kind: noop
      - name: a
        kind: noop
  - step: second
    kind: workbook
    name: absent
  - step: third
    kind: python
    tool: {url: x}
`,
			want: []string{
				"5:5: task w: kind is required",
				"7:5: workbook[1]: name is required",
				"13:9: step start: tool[1]: name is required",
				`14:9: step start: duplicate pipeline task name "a"`,
				`16:5: step second: workbook task "absent" does not exist`,
				`20:11: step third: kind must be workbook (a tool goes under tool:), got "python"`,
				"21:11: step third: tool: kind is required",
			},
		},
		{
			name: "loop problems",
			src: pb(`- step: start
  tool: {kind: noop}
  loop:
    iterator: x
  next: [b, c, d, e, f]
- step: b
  tool: {kind: noop}
  loop:
    in: "{{ xs }}"
    iterator: x
    spec: {mode: sideways, max_in_flight: -3}
- step: c
  tool: {kind: noop}
  loop:
    cursor: {kind: postgres, auth: pg}
    iterator: x
- step: d
  tool: {kind: noop}
  loop:
    cursor: {kind: mysql, claim: "select 1"}
    iterator: r
    spec:
      mode: parallel
      frame: {max_rows: -1, process: batch, lease_seconds: 10, heartbeat_seconds: 10, max_bytes: 1.5}
- step: e
  tool: {kind: noop}
  loop:
    in: [1]
    cursor: {kind: natsconsumer}
- step: f
  tool: {kind: noop}
  loop: {cursor: {claim: x}, in: "{{ a }}", iterator: i, mode: cursor}
`),
			want: []string{
				"9:5: step start: loop needs in (a collection) or cursor",
				`16:18: step b: bad loop mode "sideways"`,
				"16:43: step b: loop.spec.max_in_flight must not be negative",
				"20:13: step c: a postgres cursor needs claim",
				`28:13: step d: a cursor loop's mode must be cursor, got "parallel"`,
				"29:14: step d: frame heartbeat_seconds (10) must be less than lease_seconds (10)",
				"29:25: step d: loop.spec.frame.max_rows must not be negative",
				`29:38: step d: loop.spec.frame: bad process "batch"`,
				"29:98: step d: loop.spec.frame.max_bytes must be an integer",
				"33:5: step e: loop cannot have both in and cursor",
				"33:5: step e: loop.iterator is required",
				"34:13: step e: a natsconsumer cursor needs stream",
				"37:9: step f: loop cannot have both in and cursor",
				"37:18: step f: cursor.kind is required",
			},
		},
		{
			// What a driver cannot open without is refused at parse, as a
			// SQL cursor's missing claim is, rather than pass validate and
			// fail the loop once it runs. A templated value counts as given.
			name: "cursor options a driver requires",
			src: pb(`- step: start
  tool: {kind: noop}
  loop:
    cursor: {kind: redisstream, auth: r, steam: jobs}
    iterator: x
  next: [b, c, d, e, f, g]
- step: b
  tool: {kind: noop}
  loop:
    cursor: {kind: natsconsumer, auth: n, consumer: c}
    iterator: x
- step: c
  tool: {kind: noop}
  loop:
    cursor: {kind: clickhouse, auth: ch, claim: "SELECT id FROM jobs", key: id}
    iterator: x
- step: d
  tool: {kind: noop}
  loop:
    cursor: {kind: clickhouse, auth: ch, claim: "SELECT id FROM jobs", claims_table: c, done_table: d, dead_table: x}
    iterator: x
- step: e
  tool: {kind: noop}
  loop:
    cursor: {kind: redisstream, auth: r, stream: "{{ workload.stream }}"}
    iterator: x
- step: f
  tool: {kind: noop}
  loop:
    cursor: {kind: natsconsumer, auth: n, stream: JOBS}
    iterator: x
- step: g
  tool: {kind: noop}
  loop:
    cursor: {kind: redisstream, auth: r, stream: }
    iterator: x
`),
			want: []string{
				"9:13: step start: a redisstream cursor needs stream",
				"15:13: step b: a natsconsumer cursor needs stream",
				"20:13: step c: a clickhouse cursor needs table",
				"40:13: step g: a redisstream cursor needs stream",
			},
		},
		{
			name: "wrong node kinds",
			src: pb(`- step: start
  tool: [kind, noop]
  set: [a, b]
  args: "x"
  next: {arcs: {step: a}}
  spec: {timeout: soon, policy: [1]}
  when: {a: 1}
`),
			want: []string{
				"7:10: step start: tool[0] must be a mapping, got a string",
				"7:16: step start: tool[1] must be a mapping, got a string",
				"8:8: step start: set must be a mapping, got a list",
				"9:9: step start: args must be a mapping, got a string",
				"10:16: step start: next.arcs must be a list, got a mapping",
				`11:19: step start: spec.timeout must be a number of seconds or a duration such as "30s", got "soon"`,
				"11:34: step start: spec.policy.rules[0] must be a mapping, got a number",
				"12:9: step start: when must be a template string, got a mapping",
			},
		},
		{
			name: "duplicate keys and bad set paths",
			src:  pb("- step: start\n  tool: {kind: noop}\n  tool: {kind: noop}\n  set: {ctx..x: 1, .y: 2}\n"),
			want: []string{
				`8:3: workflow step: duplicate key "tool" (first at line 7)`,
				`9:9: step start: set: bad assignment path "ctx..x"`,
				`9:20: step start: set: bad assignment path ".y"`,
			},
		},
		{
			name: "template syntax error",
			src:  pb("- step: start\n  tool: {kind: noop}\n  when: \"{{ a \"\n"),
			want: []string{"8:15: step start: when: template syntax error"},
		},
		{
			name: "template syntax error in a block scalar",
			src:  pb("- step: start\n  tool:\n    kind: postgres\n    command: |\n      SELECT {{ a ;\n      SELECT 2\n"),
			want: []string{"10:19: template syntax error"},
		},
		{
			name: "a bad template names its step and field",
			src: pb(`- step: start
  tool: {kind: noop}
  next: [second, third]
- step: second
  args: {a: "{{ x | nosuch }}"}
  vars: {v: "{{ x | nosuch }}"}
  set: {ctx.s: "{{ x | nosuch }}"}
  loop: {in: "{{ x | nosuch }}", iterator: i}
  tool:
    kind: noop
    msg: "{{ x | nosuch }}"
    params: [1, {q: "{{ x | nosuch }}"}]
- step: third
  tool: noop
  payload: "{{ x | nosuch }}"
  sink: {tool: postgres, table: "{{ x | nosuch }}"}
`),
			want: []string{
				`10:21: step second: args.a: template "{{ x | nosuch }}": unknown filter "nosuch"`,
				`11:21: step second: vars.v: template "{{ x | nosuch }}": unknown filter "nosuch"`,
				`12:24: step second: set.ctx.s: template "{{ x | nosuch }}": unknown filter "nosuch"`,
				`13:22: step second: loop.in: template "{{ x | nosuch }}": unknown filter "nosuch"`,
				`16:18: step second: tool.msg: template "{{ x | nosuch }}": unknown filter "nosuch"`,
				`17:29: step second: tool.params[1].q: template "{{ x | nosuch }}": unknown filter "nosuch"`,
				`20:20: step third: payload: template "{{ x | nosuch }}": unknown filter "nosuch"`,
				`21:41: step third: sink.table: template "{{ x | nosuch }}": unknown filter "nosuch"`,
			},
		},
		{
			name: "alias cycle",
			src:  "workload: &a {x: *a}\nworkflow: [{step: start, tool: {kind: noop}}]\n",
			want: []string{"1:18: alias *a refers to a value that contains it"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			el := parseErrors(t, tt.src)
			var got []string
			for _, d := range el {
				if d.Warning {
					t.Errorf("warning in ErrorList: %v", d)
				}
				if d.Pos.File != "t.yaml" {
					t.Errorf("diagnostic without file: %v", d)
				}
				got = append(got, fmt.Sprintf("%d:%d: %s", d.Pos.Line, d.Pos.Col, d.Message))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				if !matchDiag(got[i], w) {
					t.Errorf("error %d:\n got  %s\n want %s", i, got[i], w)
				}
			}
		})
	}
}

// matchDiag reports whether got ("line:col: message") has want's position
// and contains want's message.
func matchDiag(got, want string) bool {
	wpos, wmsg, _ := strings.Cut(want, ": ")
	gpos, gmsg, _ := strings.Cut(got, ": ")
	return gpos == wpos && strings.Contains(gmsg, wmsg)
}

func TestErrorListFormat(t *testing.T) {
	t.Parallel()
	_, err := Parse("flows/a.yaml", []byte(pb("- step: start\n- step: other\n  tool: {kind: noop}\n")))
	want := "flows/a.yaml:6:3: step start: tool is required"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
}

func TestValidPlaybookReturnsNilError(t *testing.T) {
	t.Parallel()
	p, err := Parse("ok.yaml", []byte(pb("- step: start\n  tool: {kind: noop}\n")))
	if err != nil || p == nil {
		t.Fatalf("Parse = %v, %v", p, err)
	}
}
