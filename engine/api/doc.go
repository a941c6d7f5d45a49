// Package api is cursorflow's HTTP API: register playbooks, start,
// inspect, follow and cancel executions, over JSON.
//
// New returns an http.Handler that a server binary (examples/server)
// mounts; tests mount it on an httptest.Server. Every route but the health
// probes (/healthz, /readyz) requires "Authorization: Bearer TOKEN" when
// Config.Token is set. The routes are listed by Routes and documented in
// the embedded OpenAPI 3.0 document (OpenAPI, served at GET /openapi.yaml);
// a test keeps the two equal.
//
// Errors are JSON objects {"error": "...", "problems": [...]}: a playbook
// that does not validate comes back as 400 with one problem per
// diagnostic (file, line, col, message).
package api
