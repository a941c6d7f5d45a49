package dsl

import (
	"fmt"
	"strings"
)

// Support says what this build does with a playbook field.
type Support uint8

// Supports of a field.
const (
	// Honoured fields are implemented: the run does what the field says.
	Honoured Support = iota + 1
	// Descriptive fields document the playbook (desc, metadata, ...) and
	// need nothing from the engine.
	Descriptive
	// Hint fields ask for a placement or storage choice that cannot change
	// what a run computes (NoETL's result storage tiers, where a loop
	// executes); they are accepted and their note says what happens instead.
	Hint
	// Refused fields are known but not implemented: validate reports them
	// and the engine refuses to start a playbook that uses one.
	Refused
)

// String names the support level as the generated documentation does.
func (s Support) String() string {
	switch s {
	case Honoured:
		return "honoured"
	case Descriptive:
		return "descriptive"
	case Hint:
		return "hint"
	case Refused:
		return "refused"
	}
	return "unknown"
}

// Field is one entry of the table of playbook fields.
type Field struct {
	// Path names the field: a context (playbook, metadata, step, task,
	// loop, ...) followed by the key's dotted path inside it. A trailing
	// ".*" covers every key under the prefix.
	Path    string
	Support Support
	// Note says what the field does, or why it is refused, or what the
	// engine does instead of a hint.
	Note string
}

// Fields is every playbook field the parser knows, with what this build
// does with it. It is the single source of truth behind validate's
// warnings, the engine's refusals and docs/playbook-fields.md (generated
// by FieldsMarkdown). A key the parser does not know is refused as
// unknown.
var Fields = []Field{
	{"playbook.apiVersion", Descriptive, "noetl.io/v2; anything else is warned about"},
	{"playbook.kind", Descriptive, "Playbook"},
	{"playbook.metadata", Descriptive, "name, path, description and any other key"},
	{"playbook.workload", Honoured, "the execution's inputs: top-level names and workload.*; run --set overrides keys"},
	{"playbook.vars", Honoured, "rendered once at start, read as vars.*"},
	{"playbook.keychain", Descriptive, "declares credential aliases; secrets come from the host's Keychain"},
	{"playbook.workbook", Honoured, "named reusable actions called by tool: {kind: workbook, name}"},
	{"playbook.workflow", Honoured, "the steps; one must be named start"},
	{"playbook.executor", Descriptive, "NoETL's executor profile and version; a key of its spec not listed below is warned about (not read by this build)"},
	{"playbook.executor.requires.tools", Honoured, "every listed tool kind must be registered, or the run is refused"},
	{"playbook.executor.spec.entry_step", Honoured, "must name the start step (the workflow always begins at start)"},
	{"playbook.executor.spec.no_next_is_error", Honoured, "false (the default here): a step without a matching arc ends its branch; true is refused"},
	{"playbook.executor.spec.policy.defaults.timeout_s", Honoured, "default spec.timeout of every step that sets none"},
	{"playbook.executor.spec.policy.results.reference_first", Hint, "results stay inline in the event log; templates read them the same way"},

	{"keychain.*", Descriptive, "kind, scope, auth, ...: the host's Keychain resolves the alias"},
	{"workbook.name", Honoured, "the action's name"},
	{"workbook.tool", Honoured, "the action's tool (a task mapping)"},
	{"workbook.input", Honoured, "default inputs, overridden by the calling step's input"},
	{"workbook.assert.expects", Honoured, "input names that must be given (non-null) by the call"},
	{"workbook.assert.returns", Honoured, "keys the action's result data must hold"},
	{"workbook.desc", Descriptive, ""},

	{"step.step", Honoured, "the step's name; later steps, its arcs and its set: read its result under that name (and, as NoETL's variables hold it, as ctx.NAME and workload.NAME unless set: gave ctx that name): the result's data, with the result's status (success or error) as NAME.status and its error, when it has one, as NAME.error, where the data is a mapping without keys of those names"},
	{"step.desc", Descriptive, "also description"},
	{"step.when", Honoured, "enable guard: false records step.skipped and routes nowhere"},
	{"step.args", Honoured, "rendered before the tool chain; also input"},
	{"step.vars", Honoured, "rendered after the step, read as vars.*"},
	{"step.set", Honoured, "ctx./vars. assignments rendered against output after the step; there output is the step's result envelope (status, data, error): its data at output.data. ctx and the workload are one store, as NoETL's variables: after set: ctx.page, the step's arcs and later steps read page, ctx.page and workload.page alike (a step's result keeps its own name). As NoETL's, it runs only when the step succeeded (call.done): a step that failed and on_error: continue routes past runs no set: of its own and leaves no result under its name (later steps read the one it had before, if any; a failed loop keeps its aggregate). A step.x path (NoETL's x) is stored under ctx.step: validate warns, here and in arc.set"},
	{"step.loop", Honoured, "iterate over a collection or drain a cursor; later steps and the loop's arcs read a collection loop as NoETL's aggregate: STEP.results, its items' data in order, and STEP.stats {total, success, failed}, the items that finished, succeeded and failed (its arcs also see output.results, the items' result envelopes, and output.count)"},
	{"step.tool", Honoured, "a task mapping, a pipeline list, or a kind name with the tool's fields on the step"},
	{"step.next", Honoured, "routing: a name, a list, or {spec, arcs}"},
	{"step.spec.timeout", Honoured, "bounds one run of the tool chain (seconds, a duration, or a template); a sub-playbook call then waits for its child instead of parking, and cancels it when the time is up; in a cursor loop it bounds each row's (or frame's) body, not the claim, which a cancel ends"},
	{"step.spec.on_error", Honoured, "fail (the default), continue or ignore (any other value is refused); continue/ignore: a failed step routes with event.name call.error instead of failing the execution; a loop step fails at its first failed item (items not started do not run: a loop policy rule with then: {do: continue} runs them all)"},
	{"step.spec.pool", Honoured, "worker pool that runs the step's commands"},
	{"step.spec.worker_labels", Honoured, "labels a worker must have to run the step's commands (engine/natsjs); the pool takes them when no such worker is alive"},
	{"step.spec.loop_mode", Honoured, "fanout: the step's loop is a fan-out loop (as loop.spec.loop_mode)"},
	{"step.spec.policy", Honoured, "rules for a single-tool step whose task has none"},
	{"step.spec.policy.admit", Honoured, "admission rules: the first matching rule's then.allow decides whether the step runs (false: step.skipped)"},
	{"step.kind", Honoured, "workbook: run the workbook action named by name/task"},
	{"step.name", Honoured, "the workbook action a kind: workbook step runs (also task)"},
	{"step.retry", Honoured, "retry policy of the step's tools (mapping form or the when/then list form)"},
	{"step.sink", Honoured, "saves each iteration's (or the step's) result with another tool, atomically with it"},
	{"step.output.output_select", Honoured, "keeps only the listed keys of the step's result data"},
	{"step.output.store", Honoured, "kind auto (default) stores a result over inline_max_bytes in the result store; memory/inline keep it in the log; any other kind stores it whatever its size (a run without a result store is refused)"},
	{"step.output.store.*", Hint, "ttl, compression, bucket, ...: NoETL's tiers; the engine has one result store"},
	{"step.output.inline_max_bytes", Honoured, "the size above which a kind auto result is stored (default: the store's threshold, 64 KiB)"},

	{"task.name", Honoured, "labels a pipeline task: later tasks read its result data as NAME and results.NAME, later steps and the step's arcs as STEP.results.NAME (when the step's own result data, its last task's, is a mapping without a results key, or null)"},
	{"task.kind", Honoured, "the tool kind; must be registered in the engine's tools registry at run"},
	{"task.spec.policy", Honoured, "when/then rules deciding continue, retry, break, jump or fail; a failed task's output.error (and outcome.error) is structured there, in when: and then: alike: kind (rate_limit, auth, not_found, timeout, server_error, client_error, error), retryable, status (HTTP), code (SQLSTATE), message, and prints as its text"},
	{"task.spec.timeout", Honoured, "bounds one call of the tool"},
	{"task.set", Honoured, "assignments after the task: iter., ctx., vars. or pipeline-local names; output there is the task's result (its data), as in NoETL; in a parallel loop each item reads the ctx it started with and the last to finish wins, so accumulate through the loop's result, not ctx"},
	{"task.retry", Honoured, "retry policy (mapping form or the when/then list form)"},
	{"task.sink", Honoured, "saves the task's result with another tool, atomically with the attempt"},
	{"task.output.store", Honoured, "as step.output.store, for the step's result when the task is its last"},
	{"task.output.store.*", Hint, "ttl, compression, bucket, ...: NoETL's tiers; the engine has one result store"},
	{"task.output.inline_max_bytes", Honoured, "as step.output.inline_max_bytes"},
	{"task.output_select", Hint, "results stay inline in the event log whatever their size"},
	{"task.*", Honoured, "every other key is the tool's own configuration, rendered and handed to the tool; a key the tool does not read (it lists its keys: tools.ConfigKeyLister) is ignored with a warning (engine.Lint, cursorflow validate), never refused, since NoETL playbooks may carry keys of NoETL's own tools; so is a key beside a synonym the tool reads first (endpoint beside url, sql beside command: tools.ConfigSynonymLister)"},

	{"loop.in", Honoured, "the collection (also collection): a list; null or blank text is none, anything else (a mapping, a string, a number) one item, as NoETL wraps it"},
	{"loop.iterator", Honoured, "the item's name (also element). An item reads it at top level and as iter.<iterator>, and NoETL's loop variables, all 0-based: loop_index, iter._index and loop.index (its position), iter._first, iter._last, loop.first, loop.length (the collection's length; in a fan-out, a shard's position is its number and the length the number of shards) and loop.done (false while items run). After the loop, as NoETL's variables keep them, later steps read the last item issued under the iterator's name and its index as loop_index (also ctx.<iterator> and ctx.loop_index; a collection in the result store keeps loop_index only). A cursor loop's rows have no length: a row reads its position in its frame (process: frame, the frame's number) as loop_index, iter._index and loop.index, and no first, last or length"},
	{"loop.cursor", Honoured, "a cursor source: kind, auth/credential, claim and driver options; an option the driver does not read (it lists its options: cursor.OptionKeyLister) is warned about (engine.LintCursors, cursorflow validate)"},
	{"loop.cursor.max_attempts", Honoured, "deliveries a row gets before the driver dead-letters it, and the frame's attempt limit unless frame.max_attempts is set; a literal number"},
	{"loop.cursor.reclaim_after", Honoured, "NoETL's stale-claim timeout (seconds or a duration): the engine holds the claims, so it caps the frame's lease and a silent frame is re-issued with its rows that soon; a literal"},
	{"loop.spec.mode", Honoured, "sequential, parallel (also async), chunked or cursor"},
	{"loop.spec.max_in_flight", Honoured, "bound on items (parallel), chunks (chunked), shards (fanout) or frame slots (cursor) at once, at most 10000; also concurrency; may be a template; a sequential loop (the default mode) runs one item at a time and warns about it"},
	{"loop.spec.chunk_size", Honoured, "items per command in chunked mode (also batch_size); may be a template; other modes warn about it"},
	{"loop.spec.loop_mode", Honoured, "fanout: the collection split into shard commands, fanned in as loop.fanin.completed (arcs see fanin.total_shards, done, failed, results); local: the default"},
	{"loop.spec.shards", Honoured, "fan-out: number of shards (at most one per item; default one per item)"},
	{"loop.spec.shard_size", Honoured, "fan-out: items per shard instead of shards"},
	{"loop.spec.max_shard_retries", Honoured, "fan-out: times a failed shard is issued again before it counts as failed (default 0)"},
	{"loop.spec.allow_partial", Honoured, "fan-out: the step completes and routes when some shards failed (default: a failed shard fails the step)"},
	{"loop.spec.frame", Honoured, "cursor frame bounds: max_rows (default 1: a row a frame), row_concurrency (process: row only), lease_seconds (default 60; also how long one claim may take before it is cut and tried again), heartbeat_seconds (default lease_seconds/10; a frame missing about three is re-issued), max_seconds (process: row only), max_bytes, max_attempts, process; numbers may be templates; seconds at most 30 days; rows past max_bytes or max_seconds go back to the source unless their next delivery would pass max_attempts (then they run)"},
	{"loop.spec.policy", Honoured, "rules for the loop's items (rows, frames): decide a task's outcome when the task has no spec.policy of its own, before step.spec.policy"},
	{"loop.spec.policy.exec", Hint, "where NoETL runs the loop (local or distributed); here items are commands any worker may run"},
	{"loop.aggregate", Refused, "NoETL's loop result reducer is not implemented; the loop's result is NoETL's default aggregate {results, stats}"},
	{"loop.sink", Honoured, "saves each iteration's result with another tool, atomically with the iteration"},

	{"next.spec.mode", Honoured, "exclusive (first matching arc) or inclusive (every matching arc; arcs that converge on one step join there)"},
	{"next.spec.on_no_match", Honoured, "quiet/ignore (the default: the branch ends) or error/fail (the execution fails)"},
	{"next.arcs", Honoured, "the arcs"},
	{"arc.step", Honoured, "the target step"},
	{"arc.when", Honoured, "guard; rendered against output, event.name, ctx and the step's result"},
	{"arc.set", Honoured, "assignments when the arc is taken"},
	{"arc.args", Honoured, "arguments for the target (also input): its templates read them, and its tools are called with them (python's input_data, noop's data) under the step's own args, which win"},

	{"rule.when", Honoured, "the rule's condition"},
	{"rule.else", Honoured, "the fallback rule"},
	{"rule.then.do", Honoured, "continue, retry, break, jump or fail"},
	{"rule.then.attempts", Honoured, "total attempts of a retry (also max_attempts); may be a template; attempts, backoff and delay on a rule whose do is not retry are warned about"},
	{"rule.then.backoff", Honoured, "none, fixed, linear or exponential"},
	{"rule.then.delay", Honoured, "base retry delay; may be a template"},
	{"rule.then.to", Honoured, "jump target: a pipeline task or a step (not a step from a loop item: refused); warned about on a rule whose do is not jump"},
	{"rule.then.set", Honoured, "assignments when the rule matches"},
	{"rule.then.allow", Honoured, "admission rules only: whether the step runs; warned about on other rules"},

	{"retry.max_attempts", Honoured, "total attempts (also attempts); may be a template"},
	{"retry.retry_when", Honoured, "retry when this holds (with status_code, error, success, data, result, response, attempt)"},
	{"retry.stop_when", Honoured, "never retry when this holds"},
	{"retry.retry_on_status", Honoured, "retry when the HTTP status is one of these"},
	{"retry.retry_on", Honoured, "retry on error classes: error, timeout, connection_error, http_error, http_5xx, http_4xx, rate_limit"},
	{"retry.backoff", Honoured, "none, fixed, linear or exponential (default exponential when a delay is set)"},
	{"retry.initial_delay", Honoured, "base delay in seconds (also delay, backoff_seconds); may be a template"},
	{"retry.backoff_multiplier", Honoured, "factor of exponential backoff (default 2)"},
	{"retry.max_delay", Honoured, "cap on one delay"},
	{"retry.jitter", Honoured, "spreads each delay randomly over [delay/2, delay]"},
	{"retry.when", Honoured, "list form: the rule's condition (response = the response body, error, output)"},
	{"retry.then.max_attempts", Honoured, "list form: bound on attempts or pages"},
	{"retry.then.backoff", Honoured, "list form: backoff kind"},
	{"retry.then.delay", Honoured, "list form: base delay (also initial_delay, backoff_seconds)"},
	{"retry.then.next_call", Honoured, "list form: overrides of the tool's params, url, headers, body, data for the next page; a key the tool does not read is warned about (engine.Lint)"},
	{"retry.then.collect", Honoured, "list form: strategy append, replace or collect, with path into the response"},
	{"retry.then.sink", Honoured, "list form: saves each page with another tool, atomically with it"},

	{"sink.tool", Honoured, "the saving tool: a kind name or a task mapping"},
	{"sink.*", Honoured, "the saving tool's own configuration (table, mode, key, data, auth, command, ...)"},
}

// fieldIndex maps each exact path of Fields to its entry.
var fieldIndex = func() map[string]*Field {
	m := make(map[string]*Field, len(Fields))
	for i := range Fields {
		m[Fields[i].Path] = &Fields[i]
	}
	return m
}()

// LookupField returns the table entry that covers path: the exact entry,
// else the nearest "prefix.*" entry, else the nearest descriptive or hint
// entry for a prefix of it (the sub-keys of documentation are
// documentation). It returns nil for a path the table does not cover.
func LookupField(path string) *Field {
	if f := fieldIndex[path]; f != nil {
		return f
	}
	for p := path; ; {
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return nil
		}
		p = p[:i]
		if f := fieldIndex[p+".*"]; f != nil {
			return f
		}
		if f := fieldIndex[p]; f != nil && (f.Support == Descriptive || f.Support == Hint) {
			return f
		}
	}
}

// FieldsMarkdown renders the table of fields as the Markdown document
// docs/playbook-fields.md holds; a test keeps the two equal.
func FieldsMarkdown() string {
	var b strings.Builder
	b.WriteString("# Playbook fields\n\n")
	b.WriteString("Generated from `dsl.Fields` by `go generate ./dsl` (a test keeps it true). Every key the parser\n")
	b.WriteString("knows is listed with what this build does with it:\n\n")
	b.WriteString("- **honoured** — implemented: the run does what the field says;\n")
	b.WriteString("- **descriptive** — documentation only;\n")
	b.WriteString("- **hint** — a placement or storage choice that cannot change what the run computes; the note says\n  what happens instead;\n")
	b.WriteString("- **refused** — known but not implemented: `validate` warns, and `run` / `engine.Start` refuse the\n  playbook before anything runs, naming `file:line:col` and the field.\n\n")
	b.WriteString("A key the parser does not know is refused the same way. Tool kinds that the engine's tools registry\n")
	b.WriteString("does not hold (and cursor kinds missing from its cursor registry) are refused at run too.\n\n")
	b.WriteString("Paths start with the context the key appears in: `playbook` (top level), `step` (a workflow step),\n")
	b.WriteString("`task` (a tool mapping, a pipeline entry or a workbook action's tool), `workbook` (a workbook entry),\n")
	b.WriteString("`loop`, `next`, `arc`, `rule` (policy rules), `retry` (retry: blocks), `sink`; `.*` covers every\n")
	b.WriteString("key below.\n\n")
	b.WriteString("| field | support | what it does |\n|---|---|---|\n")
	for _, f := range Fields {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.Path, f.Support, strings.ReplaceAll(f.Note, "|", "\\|"))
	}
	return b.String()
}
