// Package natsconsumer is the NATS JetStream cursor driver (nats.go's
// jetstream package): a cursor loop drains a stream through a durable
// pull consumer. A host registers it under the kind its playbooks use:
//
//	reg := cursor.NewRegistry()
//	if err := reg.Register("natsconsumer", natsconsumer.New(natsconsumer.Config{})); err != nil {
//		return err
//	}
//	eng, err := engine.New(engine.Config{Cursors: reg, ...})
//
// A playbook names the stream and, usually, the consumer:
//
//	cursor:
//	  kind: natsconsumer
//	  auth: nats_queue                # a nats:// URL (several: comma-separated)
//	  stream: JOBS                    # required
//	  consumer: jobs-workers          # durable name (alias: durable); default per loop run
//	  subject: jobs.>                 # filter subject of a consumer the driver creates
//	  dead_letter_subject: dead.jobs  # optional; a stream must capture it
//
// The driver binds to the durable consumer, or creates it (explicit acks,
// deliver all, no MaxDeliver and no MaxAckPending limit: the driver
// counts deliveries itself). Without a consumer option every loop run
// gets a consumer of its own (cursorflow_<loop id>_<hash>, the loop id
// being the execution's id and the loop's run id), which reads the whole
// stream; name a consumer to share one queue across executions, so that
// a later run continues where the last one stopped. A consumer the driver
// named is deleted when its loop run is over (see below); one the cursor
// block names never is.
// Credentials that do not fit in a URL (creds files, nkeys) go in
// Config.NATSOptions.
//
// # The consumers the driver names
//
// A durable consumer costs the server memory (and, clustered, Raft
// state) for as long as it exists. The driver deletes one it named when
// its loop run is over (Driver.Finish, cursor.Finisher): the engine calls
// Finish once the loop's loop.done is recorded in the event log, or once
// its execution ended failed or cancelled (an ended execution is never
// resumed), on the engine that recorded it, with that engine's
// Config.Cursors and Keychain. So a stream that every execution drains
// does not collect a consumer per run. A consumer the cursor block names
// is never deleted: other executions may share it. Until loop.done is on
// record the consumer stays, so an execution resumed after its process
// died continues from it. What the clean-up does not cover leaves one
// consumer behind each time: a process that dies between recording
// loop.done and deleting the consumer, a failed delete (logged at warn
// level), an orchestrator without this driver or the credential (a
// scale-out server whose workers alone hold them: name a consumer there,
// or give the server's engine the driver and keychain too), and
// executions started before the engine named consumers by execution
// (their consumers are shared, and left alone).
//
// # Claim, ack, release
//
// A claim is a no-wait pull (FetchNoWait) of up to max messages.
// Row.Key is the message's stream sequence, Row.Values the payload's
// fields when it is a JSON object (integers as int64; one past int64 a
// float64 where that holds it digit for digit, else its exact decimal
// text; other numbers float64), else
// {"data": payload as text}, plus the message's headers when it has any
// (below); Lease.Attempt is the delivery count,
// Lease.Deadline the claim time plus the lease, and Lease.Token the
// message's ack reply subject. Zero rows means the consumer has nothing
// to deliver: no new message and none whose AckWait ran out (the driver
// checks the consumer's pending count before it says so).
//
// A payload that is not valid UTF-8, JSON-shaped or not, is
// {"data": payload in base64 (standard encoding), "data_base64": true},
// as the SQL drivers give binary columns: the engine records a claim's
// rows in its log (JSON, which holds only text) and a re-issued frame runs
// the rows it recorded, so a body sees the same, lossless value in both
// runs (raw bytes would reach sql_literal, which refuses them, and be
// recorded with U+FFFD in place of each invalid byte). Valid UTF-8 is
// never changed.
//
// A message's headers are the row's "headers" value, {name: value}: every
// header the publisher set (Nats-Msg-Id included, which the nats tool's
// js_get_msg leaves out with the server's own Nats- headers of a direct
// get), names as written (NATS headers are case-sensitive), and a
// name set more than once its values joined with ", ", as an HTTP field's
// are and as the nats tool's js_get_msg gives them, so a header is always
// a string: {{ iter.msg.headers['Trace-Id'] }}. Text that is not UTF-8
// has U+FFFD in place of its bad bytes, for the reason above. A message
// without headers has no "headers" value (test it with is defined or
// default({})), and a JSON payload with a "headers" field of its own
// keeps that field: the payload's fields win, as they did before headers
// were given.
//
// The lease is the consumer's AckWait: Spec.Lease (the frame's
// lease_seconds; a minute when zero), set when the driver creates or
// binds the consumer. Ack sends +ACK, Release -NAK (redelivery at once)
// and dead-lettering +TERM to the token's reply subject, and each waits
// for the server's confirmation. Since the token carries the reply
// subject, any cursor of the same credential can complete any row: the
// engine's usual path (Claim, run the frame, Ack or Release on the same
// cursor) and its re-run of a frame from its log on a fresh cursor both
// work. The driver does not send +WPI (in progress) when the engine
// heartbeats a frame: keep lease_seconds above the longest frame.
//
// # Guarantees
//
// Delivery is at least once. The consumer delivers a message to one
// claimer at a time, across any number of processes, and again only
// after AckWait or a Release. JetStream accepts an ack from a holder
// whose delivery has since been redelivered to another claimer, so the
// driver cannot fence stale holders (Features.Fencing is false); and
// redeliveries interleave with new messages, so claims are not strictly
// in stream order.
//
// A claim is held by the messages' AckWait from the fetch on
// (cursor.LeasedClaim): the engine's Commit, once the messages are on
// record, changes nothing, and its Abort (the record failed) naks them for
// immediate redelivery. Messages of a claimer that died between its claim
// and the engine's record come back when their AckWait runs out.
//
// # Dead letter
//
// A message delivered more than Spec.MaxAttempts times (the frame's
// max_attempts) is not returned as a row: the claim holds it under its
// AckWait and lists it in its Dead (cursor.Claim.Dead: stream sequence,
// values and delivery count), so that the engine reports it dead, also
// when the claim has no rows. Commit, which the engine calls once that
// report is recorded, publishes a copy to dead_letter_subject (when set;
// with its headers plus Cursorflow-Stream, -Consumer, -Sequence,
// -Subject, -Deliveries and -Reason) and then terminates it (+TERM), so
// the consumer never delivers it again. Abort naks it, and a claimer that
// dies leaves it to come back after AckWait: a later claim lists it dead
// again, so no message is terminated that the log does not report dead
// (one whose publish or +TERM failed in Commit comes back too, and is
// reported twice). DeadLetter (the engine's request,
// cursor.DeadLetterer) publishes and terminates at once, reading the
// stored message by its sequence.
//
// Connections: one connection per credential, reconnecting forever with
// Config.ReconnectWait between attempts. Errors never quote the
// credential.
package natsconsumer
