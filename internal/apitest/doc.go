// Package apitest starts a cursorflow API server (package engine/api)
// on a real in-process engine for tests: [Start] returns a [Server] whose
// engine has an in-memory event log and two tools, echo and gate, that
// let a test see what ran and hold an execution in flight. Both the API's
// own tests and the command-line client's tests use it.
package apitest
