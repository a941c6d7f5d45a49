// Package tools defines what a playbook task runs: the Tool interface, the
// NoETL result envelope (Output), the Registry that maps a task's kind to
// its Tool, and the Keychain that resolves credential aliases on the
// worker.
//
// # Tools
//
// A Tool receives a Call whose Config is the task's configuration with
// every template already rendered, and returns an Output in NoETL's
// envelope {status, data, error}. The work failing (HTTP 500, SQL error,
// Python exception) is an Output with Status "error", which policy rules
// can match and retry; Execute returns a Go error only when the call
// could not be made at all (unknown credential alias, missing required
// config).
//
// A tool whose configuration keys are a closed set lists them
// (ConfigKeyLister), so that a key it would ignore — a typo such as parms
// for params — is reported before the run (engine.Lint) instead of being
// dropped in silence.
//
// The built-in tools live in subpackages — http, postgres, duckdb, nats,
// secrets, noop, python, shell — and package builtin registers them all. Package fn turns a
// host's Go function into a Tool:
//
//	reg, closer := builtin.NewRegistry(builtin.Options{})
//	defer closer.Close()
//	reg.MustRegister("enrich", fn.New(enrich))
//
// # Credentials
//
// Playbooks name credentials by alias (`auth: pg_main`); the worker
// resolves the alias through a Keychain, so secrets never travel in
// commands, events or logs. StaticKeychain, EnvKeychain
// (CURSORFLOW_CREDENTIAL_<ALIAS>) and FileKeychain (YAML or JSON) cover
// the usual sources, and ChainKeychain tries several in order. Tools pass
// any error text that might echo a connection string through Redact
// before it becomes Output.Error.
//
// A secret a playbook needs as a value (a token in a header) is read with
// the secrets tool, which returns a reference (SecretRef) instead of the
// secret: results and the event log hold only the reference. The engine's
// worker reveals references in the configuration it hands a tool that
// takes secrets (SecretTaker; RevealSecrets) and conceals them again in
// what the tool returns (ConcealSecrets). Any other tool's task that names
// a reference fails with ErrSecretNotTaken: concealing catches exact
// copies only, and a playbook could compute anything from a secret it
// could pass to a SELECT.
package tools
