// Package api is cursorflow's HTTP API: register playbooks, start,
// inspect, follow and cancel executions, over JSON.
//
// New returns an http.Handler that a host mounts on its own ServeMux,
// next to its own routes (see the package example: under a prefix with
// http.StripPrefix), or that a server binary (examples/server) serves as
// it is. Config.Engine is anything that starts and cancels executions: an
// *engine.Engine in one process, or a *leader.Orchestrator (package
// engine/leader) when replicas share a PostgreSQL event log and only the
// lease holder drives executions.
//
// Every route but the health probes (/healthz, /readyz) requires
// "Authorization: Bearer TOKEN" when Config.Token is set. The dashboard's
// login page and its embedded scripts and styles (under /ui/) are served
// without it: they hold no data, and its other pages send a browser
// without a session to the login page. The routes are
// listed by Routes and documented in the embedded OpenAPI 3.0 document
// (OpenAPI, served at GET /openapi.yaml); a test keeps the two equal.
//
// Errors are JSON objects {"error": "...", "problems": [...]}: a playbook
// that does not validate comes back as 400 with one problem per
// diagnostic (file, line, col, message).
package api
