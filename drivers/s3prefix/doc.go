// Package s3prefix is the cursor driver for queues of objects under a
// prefix of a bucket (gocloud.dev/blob): S3 and S3-compatible servers
// through s3blob, or an in-process memblob bucket for the embedded case.
//
// A host wires it with one registry call:
//
//	reg := cursor.NewRegistry()
//	reg.Register("s3prefix", s3prefix.New(s3prefix.Config{}))
//
// and a playbook drains a prefix with
//
//	loop:
//	  cursor:
//	    kind: s3prefix
//	    url: s3://my-bucket?region=eu-west-1   # or auth: <keychain alias>
//	    prefix: jobs/pending/
//	    read_body: true
//	  iterator: job
//	  spec: {mode: cursor, max_in_flight: 4, frame: {max_rows: 500, lease_seconds: 60, max_attempts: 3}}
//
// A request to an s3:// bucket opened by the default Config.OpenBucket
// waits at most Config.ResponseHeaderTimeout (30 s by default) for the
// response's headers: a server that accepts connections and never
// answers fails the claim, after the AWS SDK's own retries, as a
// transient failure the engine retries before it fails the loop. The
// transfer of a body is not bounded.
//
// # Rows
//
// Every object under prefix is a row; Row.Key is its name below the
// prefix. Row.Values holds key (the full object key), name, size,
// modified (RFC 3339, UTC) and, with the option read_body: true, body
// for objects of at most max_body_bytes (1 MiB by default; larger ones
// carry body_skipped: true instead). body is the object's text, or with
// the option body_json: true its decoded JSON (an object that does not
// parse: its text, with body_error saying why).
//
// An object that is not valid UTF-8 is given in base64 (standard
// encoding), with or without body_json, and the driver sets
// body_base64: true beside it; body_json then also sets body_error (JSON
// is UTF-8, and one holding invalid bytes would decode with U+FFFD in
// their place). body_base64 is a value the driver sets, not an option:
// the engine records a claim's rows in its log (JSON, which holds only
// text) and a re-issued frame runs the rows it recorded, so raw bytes
// could not reach the loop's body the same, lossless way both times. The
// SQL drivers give binary columns the same way. Valid UTF-8 is never
// changed.
//
// Options: url (the bucket, when the cursor has no auth credential),
// prefix (default pending/), done_prefix, lease_prefix, dead_prefix
// (defaults: done/, leases/ and dead/ beside the pending prefix, so
// jobs/pending/ gives jobs/done/, jobs/leases/, jobs/dead/; no prefix may
// contain another), read_body, body_json, max_body_bytes.
//
// # Leases and fencing
//
// A row's lease history is a chain of immutable marker objects
// <lease_prefix><name>#<generation>, each created with a conditional put
// (blob.WriterOptions.IfNotExist, S3's If-None-Match: *). A claim creates
// the next generation as a lease holding its expiry and the delivery
// count; so does every later change of the row: a reclaim after the lease
// expired, a release, an acknowledgement, a dead letter. Since only one
// writer can create a given generation, two claimers racing for the same
// row (or a reclaimer racing the holder's acknowledgement) cannot both
// win, and the lease token (Lease.Token, the generation) fences the
// holder: an Ack or Release whose next generation already exists is
// refused with cursor.ErrStaleLease. Lease.Deadline is the expiry, which
// claimers compare with their own clocks: keep them in step well within
// a lease.
//
// A marker key is 11 bytes longer than <lease_prefix><name>. Where that
// would exceed what buckets take (1024-byte keys on S3, 255-byte path
// segments on file-backed servers such as versitygw's posix backend), the
// markers are <lease_prefix>#sha256:<hex SHA-256 of name>#<generation>
// instead, so that every object a bucket holds can be claimed: a claim
// maps each listed object to its marker name. (Versions before this
// hashing wrote such markers plainly where the server took them; a row
// leased by one of those when upgrading is delivered again, and its old
// markers are deleted once no live lease is left in them. An object whose
// own name has the hashed form, #sha256: and 64 hex digits, is hashed
// too.)
//
// # Delivery guarantee
//
// At least once. Ack creates a "done" generation, then copies the object
// to the done prefix, deletes it from the pending prefix and deletes its
// markers (older generations first). A claimer that dies half-way leaves
// the done marker as the row's latest state, and the next claim finishes
// the move instead of delivering the row again (a copy that finds the
// object's bytes in the done prefix already counts as made: versitygw's
// posix backend, for one, cannot overwrite a key whose last segment is
// over 227 bytes). An object is delivered again only after its lease
// expired without an Ack (the holder died or overran its lease), or
// after Release.
//
// A claim is held by its lease marker from the claim on: the engine's
// Commit, once the objects are on record, changes nothing for them (it
// buries the claim's Dead, see below), and its Abort (the record failed)
// releases them, counting the delivery. Objects of a claimer that died
// between its claim and the engine's record are claimed again once their
// markers expire.
//
// # Dead letters
//
// Delivery counts live in the markers (Lease.Attempt). A row released
// with Spec.MaxAttempts deliveries, or whose lease lapses after its last
// allowed delivery, is buried by the next claim instead of coming back.
// That claim leases it (a leased marker that counts no delivery and keeps
// the reason) and lists it in its Dead (cursor.Claim.Dead: the name, the
// listing's key, size and modified, and the deliveries it had), so that
// the engine reports it dead, also when the claim has no rows. The move
// to the dead prefix waits for the claim's Commit, which the engine makes
// once the claim (or, for a claim of no rows, the frame that reports its
// Dead) is on record: an Abort hands the row back, and a claimer that
// dies first leaves it to the claim after its lease, which lists it dead
// again. So the log reports every row in the dead prefix; dying between
// the record and Commit can report one twice. Release itself does not
// bury a row, since the engine would never learn of it. The engine may
// also dead-letter rows itself (cursor.DeadLetterer). The reason is
// logged.
//
// # Drain
//
// A claim returns zero rows when every object under the prefix holds a
// live lease, or there is none. Object names must not be reused while an
// earlier object of the same name still has markers. On a server that
// cannot overwrite (versitygw's posix backend, for last segments over 227
// bytes) a name reused after an earlier object of it was moved cannot be
// moved in turn: every claim that finishes its move fails, naming the
// copy, until the earlier object is deleted from the done (or dead)
// prefix.
//
// # Buckets
//
// Conditional creation must be atomic. S3 (and versitygw, MinIO, ...)
// and memblob arbitrate it; gocloud's fileblob does not (its IfNotExist
// checks, then writes: two writers can both win), so file:// URLs are
// refused unless Config.AllowFileBlob is set for a single claimer. On S3
// the driver deletes with DeleteObjects, a thousand keys per request.
// Credentials come from the AWS SDK's usual sources (environment, shared
// config); the bucket URL itself carries no secret.
//
// Cost per row on S3: one list entry, three puts (lease marker, done
// marker, copy), one HEAD (to make sure the object was not moved while the
// claim was being made) and a share of two batched deletes.
package s3prefix
