// Package redisstream is the Redis Streams cursor driver (go-redis v9,
// Redis 6.2 or later): a cursor loop drains a stream through a consumer
// group. A host registers it under the kind its playbooks use:
//
//	reg := cursor.NewRegistry()
//	if err := reg.Register("redisstream", redisstream.New(redisstream.Config{})); err != nil {
//		return err
//	}
//	eng, err := engine.New(engine.Config{Cursors: reg, ...})
//
// A playbook names the stream and, usually, the group:
//
//	cursor:
//	  kind: redisstream
//	  auth: redis_queue              # a redis:// or rediss:// URL
//	  stream: jobs                   # required
//	  group: jobs-workers            # default: cursorflow:<loop id>
//	  consumer: worker               # consumer name prefix; default slot
//	  dead_letter_stream: jobs:dead  # default: <stream>:dead
//	  start: "0"                     # where a new group starts: 0 or $
//	  delete_acked: false            # XDEL entries once acknowledged or dead-lettered
//
// The driver creates the group (and the stream) when it does not exist.
// Without a group option every loop run gets a group of its own, which
// reads the whole stream from start (the loop id is the execution's id
// and the loop's run id, so two executions never share it); name a group
// to share one queue across executions, so that a later run continues
// where the last one stopped.
//
// # The groups the driver names
//
// A group the driver named is destroyed when its loop run is over
// (Driver.Finish, cursor.Finisher): the engine calls Finish once the
// loop's loop.done is recorded in the event log, or once its execution
// ended failed or cancelled (an ended execution is never resumed), on the
// engine that recorded it, with that engine's Config.Cursors and
// Keychain. XGROUP DESTROY drops the group with its pending list, so a
// stream that every execution drains does not collect a group per run.
// A group the cursor block names is never destroyed: other executions
// may share it. Until loop.done is on record the group stays, so an
// execution resumed after its process died continues from it. A frame
// of an ended execution still running as its group goes (a failed
// execution's cut-short frame handing its entries back) gets
// cursor.ErrStaleLease from Ack and Release, and DeadLetter moves none:
// they never create the group again, which nothing would destroy. What
// the clean-up does not cover leaves one group behind each time: a process
// that dies between recording loop.done and destroying the group, a
// failed XGROUP DESTROY (logged at warn level), an orchestrator without
// this driver or the credential (a scale-out server whose workers alone
// hold them: name a group there, or give the server's engine the driver
// and keychain too), and executions started before the engine named
// groups by execution (their groups are shared, and left alone).
//
// # Claim, ack, release
//
// Frame slot N claims as consumer "<consumer>-N". One Lua script per
// claim, atomic on the server: XAUTOCLAIM takes over entries that a
// consumer of the group has held longer than the lease (Spec.Lease, the
// frame's lease_seconds; a minute when zero) without acknowledging them,
// then XREADGROUP reads new entries, up to max in all. Row.Key is the
// entry id, Row.Values the entry's fields (strings), Lease.Attempt the
// group's delivery count, Lease.Deadline the claim time plus the lease,
// and Lease.Token the entry id with its delivery count ("1700000000000-0#2").
// Zero rows means nothing is new and nothing is overdue; entries that
// other consumers hold within their lease are theirs.
//
// Field values and names are Redis's bytes, as text when they are valid
// UTF-8 and in base64 (standard encoding) when they are not, as the SQL
// drivers give binary columns: the engine records a claim's rows in its
// log (JSON, which holds only text) and a re-issued frame runs the rows it
// recorded, so a body sees the same, lossless value in both runs (raw
// bytes would reach sql_literal, which refuses them, and be recorded with
// U+FFFD in place of each invalid byte). Valid UTF-8 is never changed.
// Nothing marks a field as encoded: keep binary payloads in fields that
// always hold binary (or base64 them yourself) when a body must tell the
// two apart.
//
// Ack acknowledges (XACK; with delete_acked also XDEL, as for an entry
// moved to the dead-letter stream). Release hands
// entries back at once: it sets their idle time past the lease, so the
// next claim of any slot reclaims them, counting another delivery. An
// entry handed back because its body failed has its error (the frame's
// record of it, bounded and with secrets redacted: cursor.Row.Error)
// kept, in the same script, in the hash "<stream>:cursorflow:last_error:<group>"
// under its id, until the entry is acknowledged or dead-lettered; Finish
// deletes the hash with the group it destroys. An entry deleted from the
// stream while pending (XDEL, XTRIM) leaves its field behind.
//
// # Guarantees
//
// Delivery is at least once. The consumer group arbitrates between any
// number of claimers in any number of processes: an entry is delivered
// to one consumer at a time, and again only after its lease ran out or
// it was released. Ack and Release are fenced (Features.Fencing): a Lua
// script acknowledges or releases an entry only if its delivery count
// still equals the token's, so a holder whose lease ran out and whose
// entry was reclaimed gets cursor.ErrStaleLease instead of acknowledging
// work someone else now does. The engine heartbeats its frames but the
// driver has no lease extension: keep lease_seconds above the longest
// frame.
//
// A claim is held by the group's pending list from XREADGROUP on: the
// engine's Commit, once the entries are on record, changes nothing for
// the entries it runs, and its Abort (the record failed) releases them
// at once. Entries of a claimer that died between its claim and the
// engine's record come back when their lease runs out.
//
// # Dead letter
//
// An entry claimed for a delivery beyond Spec.MaxAttempts (the frame's
// max_attempts) is not returned to run: the claim's script keeps it
// pending under the claimer (XAUTOCLAIM took it over, idle time reset),
// so the claim's lease holds it like its other entries, and the claim
// lists it in its Dead (cursor.Claim.Dead: key, fields and delivery
// count), so that the engine reports it dead, also when the claim has no
// rows. Commit, which the engine calls once that report is recorded,
// copies it to the dead-letter stream with its fields plus cursorflow_id,
// cursorflow_stream, cursorflow_group, cursorflow_deliveries,
// cursorflow_reason and, when its body failed before,
// cursorflow_last_error (why: its last delivery's error), and
// acknowledges it, in one script and only while its delivery count still
// equals the claim's (the claim still holds it). Abort hands it back as
// it was before the claim (its delivery count too), for the next claim
// to list dead again at once; a claimer that dies before Commit leaves it
// to come back when the lease runs out, counting a delivery as for any
// entry, and be listed dead again; a late Commit of that claimer then
// refuses it (cursor.ErrStaleLease) and leaves it to the claim that took
// it over. So no entry reaches the dead-letter stream that the log does
// not report dead; a process killed between the record and Commit can
// have an entry reported dead twice, never moved twice. DeadLetter (the
// engine's request, cursor.DeadLetterer) copies and acknowledges
// still-pending entries at once, without checking tokens. In Redis Cluster the
// stream and its dead-letter stream must share a hash slot: use a hash
// tag ({jobs} and {jobs}:dead); the last errors' hash, named after the
// stream, then shares it too.
//
// Connections: one go-redis client per credential, which reconnects by
// itself. Errors never quote the credential.
package redisstream
