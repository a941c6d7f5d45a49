// Package natsjs carries the engine's commands and reports over NATS
// JetStream, so that one orchestrator drives executions whose commands run
// on any number of worker processes.
//
// # Wiring
//
// The orchestrator runs an engine with no workers of its own and a
// Dispatcher; Serve feeds the workers' reports to the engine's Reporter:
//
//	d, _ := natsjs.NewDispatcher(ctx, natsjs.Config{Conn: nc})
//	e, _ := engine.New(engine.Config{Log: log, Workers: 0, Dispatcher: d})
//	// resume unfinished executions first (see Dispatcher.Serve)
//	go d.Serve(ctx, e.Reporter())
//
// Each worker process pulls its pool's commands:
//
//	w, _ := natsjs.NewWorker(ctx, natsjs.Config{Conn: nc}, natsjs.WorkerOptions{
//		Worker: &engine.Worker{ID: "w1", Tools: treg, Cursors: creg, Keychain: kc},
//		Pool:   "default", Concurrency: 8,
//	})
//	w.Run(ctx) // cancel ctx to stop gracefully
//
// # Subjects, streams and the bucket
//
// Everything is named from Config.Prefix (p, "cursorflow" by default):
//
//   - p.cmd.<pool>: commands, on stream P_COMMANDS (work-queue retention,
//     one durable pull consumer "pool-<pool>" per pool, explicit ack).
//     A step's spec.pool picks the pool; the default pool is "default".
//     AckWait is the transport lease: a worker sends InProgress every
//     AckWait/3 while the command runs.
//
//   - p.cmd.<pool>.<worker id>: commands for one worker, consumed by its
//     durable "worker-<id>" (created by workers with labels, removed a
//     while after the worker is gone).
//
//   - p.evt: workers' reports (frame.claimed, frame.done,
//     command.completed, command.failed, call.partial), on stream P_EVENTS, consumed
//     by the durable "orchestrator". Serve records up to
//     DefaultEventConcurrency reports at once, so the engine appends them
//     to the event log in batches, but one command's reports (header
//     Cf-Command) one after another in stream order, so its partial
//     results are on record before its end (a report delivered again after
//     an error can still come after later ones: a partial then refused is
//     lost, its command's outcome is not); a report is acknowledged once the
//     engine recorded it or refused it as stale, and delivered again on any
//     other error.
//
//   - p.hb: heartbeats (core NATS, at most once): they extend a command's
//     engine lease. A worker sends one as it starts a command (not a
//     chained one), so the engine knows the attempt was taken: only such
//     attempts count toward max_attempts once their lease runs out, and
//     an outage of the workers or of NATS, however long, costs none.
//
//   - p.cancel: cancel announcements (core NATS, at most once; the
//     orchestrator repeats them every few seconds while commands of the
//     execution are in flight): every worker stops that execution's
//     commands (engine.Worker.Cancel).
//
//   - p.check: request/reply staleness check of a redelivered command,
//     or of one that waited in the stream half its lease or more.
//
//   - p.chain: chained frame reports (core NATS request/reply, see
//     engine.ChainReporter): a frame.done with the rows its worker claimed
//     ahead for the slot's next frame (the body is the frame.done without
//     its payload as JSON, then that payload and the claim's as they are;
//     header Cf-Chain gives the first two lengths); the answer is the next command
//     (which never goes through p.cmd), "ok" (recorded, no next frame),
//     "stale" or "retry" (not recorded: the worker reports the frame.done
//     alone on p.evt).
//
//   - bucket P_PLAYBOOKS: playbook sources by SHA-256 (Command.PlaybookHash).
//     The dispatcher stores a source once; workers fetch it and parse it
//     once per hash.
//
//   - p.workers: workers' capacity reports (core NATS, every
//     WorkerOptions.CapacityEvery): id, pool, labels, slots and free slots;
//     p.workers.ping asks every worker for one at once. A Registry (every
//     server replica runs one; the Dispatcher has its own) lists the live
//     workers — engine.WorkerLister, GET /v1/workers — and forgets one that
//     stopped or missed three reports.
//
// # Capacity-aware dispatch
//
// A command whose step has spec.worker_labels goes to p.cmd.<pool>.<id>
// of the live worker of its pool whose labels include them, the one with
// the most free slots (counting the commands sent since its report), and
// to the pool's subject when none is alive. When a worker is forgotten,
// the Dispatcher purges its subject: the engine re-issues those commands
// when their lease runs out, to a worker that is alive.
//
// # Large results
//
// A report larger than a NATS message (the server's max_payload, 1 MB by
// default) cannot travel: the worker reports the command failed, saying
// to configure a result store (engine.Worker.Results and the
// orchestrator's engine.Config.Results), with which results over its
// threshold travel as references. A cursor frame whose claimed rows do
// not fit a message (wide rows times max_rows) cannot be recorded on any
// attempt either: the claim is rolled back and the loop fails at once,
// naming the step, the size and the limit (claim fewer or narrower rows).
//
// # Streams or consumers gone
//
// An operator may delete a stream or a consumer, and a NATS server
// restarted on an empty store has none. Both sides make them again: the
// dispatcher before retrying a failed publish, and after a reconnect,
// storing playbook sources again (it also stores them again every ten
// seconds, in case the bucket alone went); Serve checks every two seconds
// that its events consumer exists; a worker checks its consumers while
// fetches fail or bring nothing, and makes the events stream again when a
// report finds it gone. A playbook missing from the bucket is handed back,
// not failed. Commands lost with the store are re-issued by the engine
// when their leases run out.
//
// # Two leases and redelivery
//
// The engine's lease (Config.CommandLease, a frame's lease_seconds) is the
// authority: when a command goes without heartbeat for that long (or, once
// it has heartbeated, for a few heartbeat intervals), the engine re-issues
// it as a new attempt (a new command id, the fencing
// token), so a late report of the old attempt is refused (ErrStale).
// JetStream's AckWait only decides when the old attempt's message is
// delivered again. Running both would run a crashed worker's command twice
// (old attempt redelivered, new attempt issued), so a worker that receives
// a redelivered message first asks the orchestrator (p.check) and runs it
// only if its attempt is still current and, for a frame without recorded
// rows, no claim of it is on record (another delivery would claim fresh
// rows under the same token, and the rows recorded by frame.claimed would
// be left behind; the engine's re-issue brings them instead). A message
// of an execution being cancelled runs knowing it, so it settles at once.
// The engine answers the check itself (engine.Voucher) and renews the
// attempt's lease with the answer, as a first heartbeat would, so an
// attempt whose lease was about to run out is not re-issued after it was
// vouched for and run twice. A message the orchestrator does not vouch
// for is dropped: if it was current after all, the engine's lease
// re-issues it.
//
// The engine fences only the reports of a superseded attempt, not its
// body: a worker cut off from NATS (a partition, a connection gone silent
// that the client notices only minutes later) would run on beside the
// attempt the engine issues elsewhere. So a worker checks, while it runs a
// command, that it still reaches the NATS server (a flush, four times per
// heartbeat interval), and stops the command, as at the end of the grace
// period, half an interval before the engine can re-issue it
// (WorkerOptions.MissedHeartbeats, the engine's Config.MissedHeartbeats):
// its context ends with ErrCutOff and a frame hands back the rows it has
// not started. A tool that ignores its context runs on, and its late
// report is refused, as before.
//
// The first delivery of a message is checked the same way when the
// message waited in the stream half its command's lease or more (by the
// server's timestamp and the worker's clock): with no worker taking the
// pool's commands, the engine re-issued the command once per lease, and
// every attempt waits in the stream as a message of its own; run on first
// delivery, each superseded attempt would run its body (a frame's
// recorded rows) before its reports were refused. A younger message
// cannot have been re-issued yet (the engine waits a whole lease) and
// runs without the round trip.
//
// A frame.claimed report waits for the orchestrator's verdict, because the
// rows must be on record before the claim commits and the frame's body
// runs; every other report returns once the events stream has it. With no
// verdict within Config.ReportTimeout the worker aborts the claim (if the
// rows were recorded after all, the engine re-issues the frame with them
// once its heartbeats stop).
//
// # Chained frames
//
// A worker that ran a frame of a transactional source claims the slot's
// next rows and sends them with the frame.done on p.chain; the command
// the orchestrator answers with runs at once on the same worker, so a
// slot costs one request and one event-log append per frame instead of a
// report, an append, a dispatch through P_COMMANDS, a claim report and a
// second append. A request without an answer is sent again every two
// seconds (the orchestrator answers a request it already recorded with
// the same command, so an answer lost with a leader that died is made up
// by the next), and meanwhile the worker heartbeats the command its rows
// may already be recorded under, so it is not re-issued while the claim
// is still the worker's. An answer that the report was not recorded (an
// append that failed, perhaps after its commit) has it sent again too,
// with backoff. With no answer, or none but that, within
// Config.ReportTimeout the worker rolls the claim back and reports the
// frame.done alone. A slot
// chains at most engine.Worker.MaxChain frames (16) in a row on one
// worker; then its next frame is dispatched again, so frames spread over
// workers that joined since. A frame whose rows handed on partial results
// is not chained: the request would bypass the events stream its
// partials travel, and could be recorded before them, which refuses them
// as late; its frame.done goes on p.evt behind them.
//
// # Stopping a worker
//
// Cancelling Run's context stops fetching, lets running commands finish
// for up to WorkerOptions.Grace, then cancels them and hands their
// messages back (Nak, so another worker runs the same attempt at once), or
// terminates them when the frame's claim is already on record (the
// engine's re-issue after the lease brings the recorded rows).
package natsjs
