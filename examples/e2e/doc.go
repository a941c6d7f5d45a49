// Package e2e holds the end-to-end tests of the distributed deployment:
// server replicas (examples/server) and worker processes
// (examples/worker), built and started as real processes against a real
// PostgreSQL and NATS JetStream, with workers and the leading replica
// killed mid-run. It has no non-test code.
package e2e
