// Package resultstore keeps large step results out of the event log: a
// result (or a loop's aggregate) whose JSON encoding is larger than a
// threshold (DefaultThreshold, 64 KiB) is written to a blob store
// (gocloud.dev/blob: file://, s3://, mem:// and any other driver a host
// registers), and the event that reports it, and every command that
// carries it to a worker, holds a small reference instead:
//
//	{"$result_ref": {"uri": "s3://bucket/results/<execution>/<command>/<sha256>.json",
//	                 "size": 5242913, "sha256": "9f86d0…"}}
//
// Keys are derived from the execution and command ids and from the
// content's SHA-256, so a retried write of the same result writes the
// same object (idempotent), and two attempts that produced different
// results never overwrite each other. A reader checks the SHA-256 of what
// it reads against the reference.
//
// The engine resolves references transparently: a template that names a
// step whose result was stored reads the stored value (see package dsl's
// Refs), loaded once and cached.
//
// Package resultstoreurl opens a Store from a URL (the CLI's and the
// example server's --result-store flag).
package resultstore
