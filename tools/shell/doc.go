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
// worker's environment without CURSORFLOW_CREDENTIAL_* variables, plus a
// CURSORFLOW_PROC_<id>=1 variable of the call's own: a timeout or a
// cancel kills the command's process group and, where /proc exists, every
// process that inherited the variable, including one that left the group
// (setsid). A process the command leaves running that still holds its
// output 2 s after it exited fails the call and is killed the same way.
// Output cut at Config.MaxOutput, and stderr quoted in the error, never
// end in the first part of a secret revealed to the call.
//
// While the command runs, each line it writes is handed on as a partial
// result, {"stream": "stdout"|"stderr", "line": ...} (see
// tools.Call.EmitPartial).
package shell
