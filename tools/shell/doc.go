// Package shell is cursorflow's shell tool: it runs one command per call.
//
// Task configuration:
//
//	command | cmd              a string, run as /bin/sh -c <string>, or a
//	                           list, run as argv without a shell
//	env                        extra environment variables
//	dir | cwd                  working directory
//	timeout | timeout_seconds  seconds; the call's context bounds it too
//
// Data is {"stdout", "stderr", "exit_code"}. A non-zero exit is an error
// Output whose Error quotes the start of stderr. A stream cut at
// Config.MaxOutput adds "stdout_truncated" (or "stderr_truncated"): true,
// and a call out of time adds "timeout": true, which a policy rule reads as
// output.error.kind "timeout". The child inherits the
// worker's environment without CURSORFLOW_CREDENTIAL_* variables.
//
// While the command runs, each line it writes is handed on as a partial
// result, {"stream": "stdout"|"stderr", "line": ...} (see
// tools.Call.EmitPartial).
package shell
