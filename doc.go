// Package cursorflow is an embeddable Go SDK for cursor-driven work
// queues: drain a Postgres table, a Redis stream, a JetStream consumer, an
// S3 prefix or a ClickHouse table reliably, fast, and with every step on
// record. Workflows are NoETL v2 playbooks; real NoETL playbooks run
// unchanged.
//
// This package holds no code: it is the map. A host service wires four
// public pieces into its own process.
//
// # Playbooks: package dsl
//
// [github.com/cursorflow/cursorflow/dsl] parses a playbook (YAML with a
// workload, workflow steps, tool pipelines, arcs, loops, policy rules and
// Jinja2 templates) into typed values and reports every problem at once as
// file:line:col: message. Templates are compiled when the playbook is
// parsed and rendered many times.
//
//	pb, err := dsl.ParseFile("flow.yaml")
//
// # The engine and its log: packages engine and eventlog
//
// [github.com/cursorflow/cursorflow/engine] is an event-sourced
// orchestrator. The append-only log ([github.com/cursorflow/cursorflow/eventlog],
// with memory, SQLite and PostgreSQL backends) is the only authority:
// an execution's state is a pure fold over its events, and every decision
// is a deterministic function of that state, so any process can rebuild
// an execution and resume it.
//
//	log, _ := sqlite.Open(ctx, "events.db", sqlite.Config{})
//	eng, _ := engine.New(engine.Config{Log: log, Tools: tools, Cursors: cursors, Keychain: kc})
//	id, _ := eng.Start(ctx, src, engine.StartOptions{File: "flow.yaml"})
//	summary, _ := eng.Wait(ctx, id)
//
// Loops run sequential, parallel (never more than max_in_flight items at
// once) or in cursor mode: the engine issues up to max_in_flight frame
// commands; a worker claims a frame of rows from the source, records the
// claim and only then commits it (so no claim exists that the log does not
// hold), runs the step's tools per row (process: row) or once per frame
// (process: frame), and reports one frame.done carrying every row's
// outcome. A zero-row claim drains a slot; when every slot has drained,
// loop.done fires exactly once. Frames hold leases: a frame whose worker
// misses a few heartbeats is re-issued with the rows it had claimed, and
// the old worker's late report is refused by its fencing token; rows the
// engine gives up on go to the source's dead letter.
//
// # Cursor sources: packages cursor and drivers
//
// [github.com/cursorflow/cursorflow/cursor] defines the Driver contract
// ("lease up to N rows, or say the source is drained") and an explicit
// registry; [github.com/cursorflow/cursorflow/cursor/cursortest] is the
// conformance suite every driver passes. The drivers live in
// subpackages of drivers/ so that importing one does not pull in another's
// client library: postgres, sqlite, mysql, redisstream, natsconsumer,
// s3prefix and clickhouse.
//
// # Tools: package tools
//
// [github.com/cursorflow/cursorflow/tools] is the Tool interface, its
// registry and keychains that resolve credential aliases on the worker
// (secrets never enter the event log). tools/builtin registers http,
// postgres, nats, secrets, noop, and python, shell and duckdb (which run
// code or touch files, so they are off unless its Options enable them);
// tools/fn turns a host's Go function
// into a tool kind; tools/playbook runs sub-playbooks.
//
// # Serving it: packages engine/api and engine/leader
//
// [github.com/cursorflow/cursorflow/engine/api] is the HTTP API (register
// playbooks; start, inspect, follow and cancel executions) and a
// dashboard under /ui/, as one http.Handler a host mounts on its own
// ServeMux next to its own routes. Status questions are answered by an
// [github.com/cursorflow/cursorflow/engine.Projection], kept current by
// reading only the log's new events. [github.com/cursorflow/cursorflow/engine/leader]
// runs the orchestrator inside a host's process on several machines: a
// lease in PostgreSQL says which one leads, and the one that takes over
// resumes every unfinished execution from the log.
//
// # Examples
//
// examples/quickstart drains a SQLite work queue with nothing to install;
// examples/cursorflow is the CLI (validate, run, resume, status, with live
// progress on a terminal); examples/server (the packages above, wired by
// flags) and examples/worker scale out over NATS JetStream with a
// PostgreSQL event log; examples/bench measures the engine against raw
// pgx drains.
package cursorflow
