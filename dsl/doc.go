// Package dsl reads NoETL v2 playbooks: YAML documents that describe a
// workflow of steps, each running a tool (an HTTP call, a SQL statement,
// a script, ...) and routing to the next steps.
//
// # A first playbook
//
//	apiVersion: noetl.io/v2
//	kind: Playbook
//	metadata:
//	  name: hello
//	workload:
//	  api_url: https://api.example.com
//	workflow:
//	  - step: start               # every workflow begins at "start"
//	    tool:
//	      kind: http
//	      url: "{{ api_url }}/items"
//	    set:
//	      ctx.count: "{{ output.data.data | length }}"
//	    next:
//	      spec: {mode: exclusive}
//	      arcs:
//	        - step: save
//	          when: "{{ ctx.count > 0 }}"
//	  - step: save
//	    tool:
//	      kind: postgres
//	      auth: pg_main
//	      command: INSERT INTO runs (n) VALUES ($1)
//	      params: ["{{ ctx.count }}"]
//
// Parse (or ParseFile) turns such a document into a *Playbook: typed Go
// values (Step, Task, Loop, Next, Policy, ...) documented field by field in
// this package. Parsing does not depend on a tool kind being registered;
// the engine resolves kinds when it runs a step.
//
// # The shape of a playbook
//
// The top level holds apiVersion, kind, metadata, workload (arbitrary
// data, kept as plain Go values), vars, keychain (credential aliases),
// workbook (named actions: {name, tool, input, assert}, called by a tool
// {kind: workbook, name, input} or a kind: workbook step), executor and
// workflow, the list of steps. workflow is required, and so is a step
// named start (or executor.spec.entry_step); step names are unique.
//
// Values are read as NoETL's Python engine (PyYAML, YAML 1.1) reads them
// in one respect where YAML 1.2 differs: an unquoted yes, no, on or off
// (any of PyYAML's spellings) is a boolean, with a warning; quote it for
// the text. And a number with a leading 0 that is no octal number
// (02139, a zip code) is text, where YAML 1.2 reads 2139. Keys are never
// converted.
//
// A step has a name (step:), an optional desc and when guard, args (NoETL
// also spells it input:), vars, set assignments, an optional loop, a
// tool, next, spec (timeout, on_error, policy, admit), retry, sink and
// output. Several parts accept more than one form, as NoETL playbooks in
// the wild use them all:
//
//   - tool is one mapping {kind, ...}, a pipeline: a list of tasks
//     [{name, kind, ...}], run in order, whose policies may jump between
//     tasks by name, or a kind name (tool: http) with the tool's fields on
//     the step itself.
//   - next is a router {spec: {mode}, arcs: [{step, when, set, args}]}, a
//     list of arcs, a list of step names, or one step name. Mode
//     exclusive (the default) takes the first matching arc; inclusive
//     takes every one.
//   - loop iterates over a collection (in or collection, iterator or
//     element; mode sequential, parallel/async or chunked; max_in_flight
//     or concurrency) or drains a cursor (cursor {kind, auth, claim} +
//     iterator, mode cursor, with frame bounds such as max_rows and
//     lease_seconds). Numbers such as these may be templates, rendered
//     when the step runs (Loop.ResolveLimits, FrameSpec.Resolve). The
//     cursor's max_attempts and reclaim_after are literals: the first is
//     the frame's attempt limit unless frame.max_attempts is set, the
//     second caps the frame's lease, a rendered one too.
//   - retry is true, a number of attempts, NoETL's mapping {max_attempts,
//     retry_when, retry_on_status, retry_on, backoff, ...} or a list of
//     {when, then: {max_attempts, next_call, collect, sink}} rules that
//     retry on error and paginate on success.
//   - spec.policy.rules is an ordered list of {when, then: {do, attempts,
//     backoff, delay, to, set}} rules ending, usually, with an else rule.
//     The common slip of writing `- else:` with then: as its sibling is
//     accepted as the author meant it.
//
// Defaults are filled in while parsing (loop mode, frame sizes, retry
// attempts, backoff), as the field comments of each type state, so code
// that runs a playbook never needs to guess.
//
// # Templates
//
// Strings may hold Jinja2 templates ({{ expression }} and {% tags %}).
// Each is compiled once, when the playbook is parsed, into a *Template or a
// *Value (a YAML value with compiled templates at its string leaves), and
// rendered many times later against the execution's variables: workload
// keys, ctx, vars, earlier steps' results by step name, iter.<iterator>,
// output (in set blocks, arc guards and policies), and a few others. A
// template that is exactly one {{ expression }} renders to the
// expression's native value (a list stays a list); any other renders to
// text that is read as NoETL reads it ("[{% for ... %}]" is a list,
// "{% if x %}true{% else %}false{% endif %}" a bool, "{{ a }}{{ b }}" of
// digits a number: see Template), unless it uses tojson. A template
// syntax error is a parse error.
//
// Values that end up in SQL text go through the sql_literal filter (a
// quoted, escaped literal: None is NULL, lists and maps their JSON; an
// optional dialect argument, sqlite, mysql or clickhouse, else the one
// the render's SQLDialectVar names, else postgres) or sql_ident (a quoted identifier) — or better, are bound
// with the tool's params. '{{ x }}' in quotes breaks, or injects, on a
// value holding a quote.
//
// Rendering is bounded (Limits, Playbook.SetLimits): a template's text
// output and the strings and lists it builds with *, + and ~ (16 MiB),
// range() (100,000 items) and its time (2 s), so a template cannot take a
// process's memory or stall the engine. Templates have no macros (one
// that recursed would overflow the stack) and cannot load other files.
//
// # Positions and problems
//
// Every parsed element keeps the Pos (file, 1-based line and column) it
// came from. Parse reports every problem it finds at once, not only the
// first, as an ErrorList of Diagnostics that print as
// "file:line:col: message" in source order: YAML syntax errors, missing
// or duplicate steps, unknown arc and jump targets, a step without a tool,
// bad enum values, negative numbers, template syntax errors and values of
// the wrong kind (a mapping where a list belongs, for example).
//
// # Honoured or refused
//
// Fields is the table of every key the parser knows and what this build
// does with it: honoured, descriptive, a hint, or refused with the reason
// (docs/playbook-fields.md is generated from it). Unknown keys are not
// parse errors, so a playbook NoETL accepts still validates; they, and
// refused fields, are listed in Playbook.Refusals (and Warnings) with
// their positions, and the engine refuses to start a playbook that has
// any: nothing a playbook says is silently ignored.
//
// # Jinja2 where gonja differs
//
// Conditional expressions (A if C else B) work wherever Jinja2 allows
// them, and /, // and % follow Python, raising on a zero divisor;
// testdata/jinja2 compares a table of expressions with Jinja2 itself.
//
// Parse never panics, whatever its input; it is fuzzed to check that.
package dsl
