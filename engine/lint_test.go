package engine_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
	"github.com/cursorflow/cursorflow/tools/noop"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

func lintRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	reg, closer := builtin.NewRegistry(builtin.Options{})
	t.Cleanup(func() { _ = closer.Close() })
	reg.MustRegister("playbook", playbook.New(nil))
	reg.MustRegister("echo", noop.New())
	return reg
}

func lint(t *testing.T, src string) []string {
	t.Helper()
	pb, err := dsl.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range engine.Lint(pb, lintRegistry(t)) {
		if !d.Warning {
			t.Errorf("%s is not a warning", d.Error())
		}
		got = append(got, d.Error())
	}
	return got
}

// TestLintUnreadKeys: a key no tool reads is a warning at the key —
// bogus keys, a typo, a timeout the tool does not have — in steps,
// pipeline tasks, sinks, workbook actions and workbook calls alike.
func TestLintUnreadKeys(t *testing.T) {
	t.Parallel()
	got := lint(t, `workbook:
  - name: act
    input: {n: 1}
    tool: {kind: postgres, auth: pg, command: 'SELECT {{ n }}', inputs: {n: 2}}
workflow:
  - step: start
    tool: {kind: postgres, auth: pg, command: SELECT pg_sleep(3), timeout_seconds: 1, retries: 5, totally_bogus_key: 1}
    next: [typo]
  - step: typo
    tool: {kind: postgres, auth: pg, command: 'SELECT $1::int', parms: ['41']}
    sink: {tool: {kind: postgres, auth: pg}, table: t, mode: upsert, key: id, colums: [a]}
    next: [pipe]
  - step: pipe
    tool:
      - name: get
        kind: http
        url: http://example.com
        header: {a: b}
        sink: {tool: postgres, auth: pg, command: 'INSERT INTO t VALUES (1)', table: t}
      - name: call
        kind: workbook
        action: act
        args: {n: 3}
`)
	want := []string{
		`p.yaml:4:65: workbook action act: tool kind postgres has no configuration key "inputs" (ignored)`,
		`p.yaml:7:67: step start: tool kind postgres has no configuration key "timeout_seconds" (ignored)`,
		`p.yaml:7:87: step start: tool kind postgres has no configuration key "retries" (ignored)`,
		`p.yaml:7:99: step start: tool kind postgres has no configuration key "totally_bogus_key" (ignored)`,
		`p.yaml:10:65: step typo: tool kind postgres has no configuration key "parms" (ignored)`,
		`p.yaml:11:79: step typo: sink: a postgres table sink has no configuration key "colums" (ignored)`,
		`p.yaml:18:9: step pipe: task get: tool kind http has no configuration key "header" (ignored)`,
		`p.yaml:19:79: step pipe: task get: sink: tool kind postgres has no configuration key "table" (ignored)`,
		`p.yaml:23:9: step pipe: task call: a workbook call has no configuration key "args" (ignored)`,
	}
	sameLines(t, "lint", got, want)
}

// TestLintQuiet: correct tasks, tools whose keys are open (noop, a host
// tool) and kinds the registry does not hold draw no warning, and none
// of lint's findings is one Start refuses for (Check).
func TestLintQuiet(t *testing.T) {
	t.Parallel()
	src := `workbook:
  - name: act
    input: {n: 1}
    tool: {kind: python, code: 'return {"n": n}', input: {m: 2}}
workflow:
  - step: start
    tool:
      kind: postgres
      credential: pg
      query: SELECT $1::int
      params: ['41']
    sink: {tool: postgres, auth: pg, table: t, mode: upsert, key: id, data: '{{ result }}'}
    next: [get]
  - step: get
    tool:
      kind: http
      method: POST
      endpoint: http://example.com
      params: {page: 1}
      headers: {a: b}
      json: {x: 1}
      timeout: 5
      auth: api
    next: [sh]
  - step: sh
    tool: shell
    cmd: [ls, -l]
    cwd: /tmp
    env: {A: b}
    timeout_seconds: 3
    next: [rest]
  - step: rest
    tool:
      - {name: a, kind: noop, anything: 1}
      - {name: b, kind: echo, anything: 1}
      - {name: c, kind: unregistered, anything: 1}
      - {name: d, kind: workbook, action: act, input: {n: 2}}
      - {name: e, kind: playbook, path: ./child.yaml, workload: {a: 1}}
`
	if got := lint(t, src); len(got) > 0 {
		t.Fatalf("lint warns:\n%s", strings.Join(got, "\n"))
	}
	pb, err := dsl.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	bogus, err := dsl.Parse("p.yaml", []byte(`workflow:
  - step: start
    tool: {kind: postgres, auth: pg, command: SELECT 1, parms: [1]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*dsl.Playbook{pb, bogus} {
		for _, d := range engine.Check(p, lintRegistry(t), nil) {
			if strings.Contains(d.Message, "configuration key") {
				t.Errorf("Check refuses: %s", d.Error())
			}
		}
	}
}

// TestLintRepoPlaybooks: the repository's own playbooks use no key their
// tools ignore, so lint's lists cover every key they really use.
func TestLintRepoPlaybooks(t *testing.T) {
	t.Parallel()
	reg := lintRegistry(t)
	n := 0
	for _, root := range []string{"../examples", "testdata", "../dsl/testdata"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
				return err
			}
			pb, _ := dsl.ParseFile(path)
			if pb == nil {
				return nil
			}
			n++
			for _, w := range engine.Lint(pb, reg) {
				t.Errorf("%s", w.Error())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n == 0 {
		t.Fatal("no playbooks found")
	}
}

// TestLintPlaceholders: a psycopg placeholder in a SQL cursor's statement
// that names nothing the statement gets is a warning at the statement;
// the names it does get (the rows' keys, the slot and frame variables,
// workload keys, step results) and an escaped %% are not.
func TestLintPlaceholders(t *testing.T) {
	t.Parallel()
	got := lint(t, `workload: {table: q}
workflow:
  - step: start
    loop:
      cursor:
        kind: postgres
        auth: pg
        claim: SELECT id FROM q WHERE slot = %(__worker_slot_id)s AND note LIKE 'a%%' LIMIT %(__frame_max_rows)s
        ack: UPDATE q SET done = true WHERE id IN %(keys)s AND t = %(table)s
        release: "UPDATE q SET status = 'pending' WHERE id IN %(ids)s"
        dead_letter: {sql: "UPDATE q SET status = 'dead', why = %(reason)s WHERE id = ANY(%(key)s)"}
      iterator: r
      spec: {mode: cursor}
    tool: {kind: noop}
`)
	want := []string{
		`p.yaml:10:19: step start: loop.cursor.release: placeholder %(ids)s names no variable`,
		`p.yaml:11:29: step start: loop.cursor.dead_letter: placeholder %(key)s names no variable`,
	}
	if len(got) != len(want) {
		t.Fatalf("lint:\n%s\nwant %d warnings", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d: %s\nwant it to start %s", i, got[i], want[i])
		}
	}
}

// TestLintCursorOptions: a cursor block's keys other than kind, auth,
// claim and the engine's own go to its driver, which ignores any it does
// not read (the SQL drivers without a word). A typo such as relase for
// release left a failed row claimed in its table for good; a driver that
// lists its options (cursor.OptionKeyLister) now has the others warned
// about at their place, as a tool's unread keys are.
func TestLintCursorOptions(t *testing.T) {
	got := lintCursors(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
workflow:
  - step: start
    tool: {kind: noop}
    loop:
      iterator: row
      cursor:
        kind: postgres
        auth: pg
        claim: "SELECT id FROM jobs"
        key: id
        ack: "UPDATE jobs SET done = true WHERE id = ANY(%(keys)s)"
        relase: "UPDATE jobs SET claimed = false WHERE id = ANY(%(keys)s)"
        dead_letter: "DELETE FROM jobs WHERE id = ANY(%(keys)s)"
    next: [drain]
  - step: drain
    tool: {kind: noop}
    loop:
      iterator: msg
      cursor: {kind: redisstream, auth: r, steam: jobs, url: "redis://x", max_attempts: 3, stream: jobs}
      spec: {frame: {max_rows: 10}}
`)
	want := []string{
		`p.yaml:15:9: step start: loop.cursor: a postgres cursor has no option "relase" (ignored)`,
		`p.yaml:22:44: step drain: loop.cursor: a redisstream cursor has no option "steam" (ignored)`,
	}
	sameLines(t, "LintCursors", got, want)
}

// sameLines fails t unless got and want hold the same lines in order.
func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s =\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// lintCursors parses playbook src and returns engine.LintCursors'
// findings for it, with the standard cursor registry, checking that each
// is a warning.
func lintCursors(t *testing.T, src string) []string {
	t.Helper()
	_, creg, closer := stdwire.Registries(nil, slog.New(slog.DiscardHandler), false)
	t.Cleanup(func() { _ = closer.Close() })
	pb, err := dsl.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range engine.LintCursors(pb, creg) {
		if !d.Warning {
			t.Errorf("%s is not a warning", d.Error())
		}
		got = append(got, d.Error())
	}
	return got
}

// TestLintMaxRows: a cursor loop that leaves frame.max_rows unset claims
// one row a frame (NoETL's default), each row with a claim, a commit and
// three events of its own: a drain at about 0.6 of the raw SQL's rate
// that the author never chose. It is warned of at the cursor block,
// unless max_rows is written (a number or a template) or a SQL claim
// sets its own batch (it does not read __frame_max_rows).
func TestLintMaxRows(t *testing.T) {
	got := lintCursors(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
workload: {rows: 50}
workflow:
  - step: start
    tool: {kind: noop}
    loop:
      iterator: job
      cursor:
        kind: postgres
        auth: pg
        claim: "SELECT id FROM jobs LIMIT {{ __frame_max_rows | default(1) }}"
    next: [stream]
  - step: stream
    tool: {kind: noop}
    loop:
      iterator: msg
      cursor: {kind: redisstream, auth: r, stream: jobs}
    next: [sized]
  - step: sized
    tool: {kind: noop}
    loop:
      iterator: job
      cursor: {kind: postgres, auth: pg, claim: "SELECT id FROM jobs LIMIT {{ __frame_max_rows }}"}
      spec: {frame: {max_rows: 1}}
    next: [templated]
  - step: templated
    tool: {kind: noop}
    loop:
      iterator: job
      cursor: {kind: redisstream, auth: r, stream: jobs}
      spec: {frame: {max_rows: "{{ workload.rows }}"}}
    next: [own_batch]
  - step: own_batch
    tool: {kind: noop}
    loop:
      iterator: job
      cursor: {kind: postgres, auth: pg, claim: "SELECT id FROM jobs LIMIT 100"}
`)
	const tail = " so every frame claims one row (NoETL's default) and each row pays a claim, its commit and three events of its own; " +
		"set max_rows (100, say) to claim rows in batches"
	want := []string{
		"p.yaml:11:9: step start: loop.spec.frame.max_rows is not set," + tail,
		"p.yaml:19:15: step stream: loop.spec.frame.max_rows is not set," + tail,
	}
	sameLines(t, "LintCursors", got, want)
}

// TestLintFrameProcess: with process: frame a frame's rows go to one call
// of the tool, so row_concurrency above 1 and max_seconds change nothing;
// a user who set them expects rows run at once, or frames cut short, and
// gets neither. Both are warned of at their keys; with process: row, or
// row_concurrency 1, nothing is.
func TestLintFrameProcess(t *testing.T) {
	got := lintCursors(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
workflow:
  - step: start
    tool: {kind: noop}
    loop:
      iterator: job
      cursor: {kind: redisstream, auth: r, stream: jobs}
      spec:
        frame:
          max_rows: 100
          row_concurrency: 8
          max_seconds: 30
          process: frame
    next: [templated]
  - step: templated
    tool: {kind: noop}
    loop:
      iterator: job
      cursor: {kind: redisstream, auth: r, stream: jobs}
      spec: {frame: {max_rows: 100, row_concurrency: "{{ workload.n }}", process: frame}}
    next: [one]
  - step: one
    tool: {kind: noop}
    loop:
      iterator: job
      cursor: {kind: redisstream, auth: r, stream: jobs}
      spec: {frame: {max_rows: 100, row_concurrency: 1, process: frame}}
    next: [rows]
  - step: rows
    tool: {kind: noop}
    loop:
      iterator: job
      cursor: {kind: redisstream, auth: r, stream: jobs}
      spec: {frame: {max_rows: 100, row_concurrency: 8, max_seconds: 30, process: row}}
`)
	want := []string{
		"p.yaml:13:11: step start: loop.spec.frame.row_concurrency has no effect with process: frame, whose rows go to one call of the tool " +
			"(ignored); use process: row to run rows at once",
		"p.yaml:14:11: step start: loop.spec.frame.max_seconds has no effect with process: frame, whose rows start together in one call " +
			"(ignored); bound the call with the step's spec.timeout",
		"p.yaml:22:37: step templated: loop.spec.frame.row_concurrency has no effect with process: frame, whose rows go to one call of the tool " +
			"(ignored); use process: row to run rows at once",
	}
	sameLines(t, "LintCursors", got, want)
}

// TestLintNextCallOfWorkbookCall: a workbook call that paginates has its
// next_call applied to the called action's tool (runAction hands it to
// runTool with the action's configuration), so next_call: {params: ...}
// on a call of an http action is read, and is no warning; a key the
// action's tool does not read is.
func TestLintNextCallOfWorkbookCall(t *testing.T) {
	t.Parallel()
	got := lint(t, `workbook:
  - name: fetch_page
    tool: {kind: http, url: http://example.com, params: {page: 1}}
workflow:
  - step: start
    tool: {kind: workbook, name: fetch_page}
    retry:
      - when: "{{ response.more }}"
        then: {next_call: {params: {page: 2}, paramz: {page: 2}}}
`)
	want := []string{
		`p.yaml:9:55: step start: retry next_call: tool kind http has no configuration key "paramz" (ignored)`,
	}
	sameLines(t, "lint", got, want)
}

// TestLintNextCallKeys: a paginating retry's next_call overrides the
// task's configuration for the next page, so a key its tool does not read
// (paramz for params) changes nothing: the same page is fetched again and
// again until max_attempts. It is warned about as the task's own unread
// keys are, for a step's retry and a task's alike.
func TestLintNextCallKeys(t *testing.T) {
	t.Parallel()
	got := lint(t, `workflow:
  - step: start
    tool:
      kind: http
      url: http://example.com
      retry:
        - when: "{{ response.more }}"
          then:
            next_call: {params: {page: 2}, paramz: {page: 2}}
    next: [step_retry]
  - step: step_retry
    tool: {kind: http, url: http://example.com}
    retry:
      - when: "{{ response.more }}"
        then: {next_call: {url: http://example.com/2, body_json: {}}}
`)
	want := []string{
		`p.yaml:9:52: step start: retry next_call: tool kind http has no configuration key "paramz" (ignored)`,
		`p.yaml:15:66: step step_retry: retry next_call: tool kind http has no configuration key "body_json" (ignored)`,
	}
	sameLines(t, "lint", got, want)
}
