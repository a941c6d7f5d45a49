// Package python is cursorflow's python tool, compatible with NoETL's
// `kind: python` tasks.
//
// Each call runs a fresh interpreter (Config.Python, default python3) with
// a small driver. The task's code becomes the body of a function, so NoETL
// code that ends in a bare top-level `return {...}` works as written, and
// so does code that only assigns `result = ...`, or code that defines
// `def main(...)` (called with the input keys it names, with input_data
// when it takes one other parameter, or with **input_data).
//
// Task configuration:
//
//	code                       Python source (required)
//	input | args | input_data  maps merged over the step's Args (in this
//	                           order, later wins) into input_data
//	libs                       {alias: module} imported before the code runs
//	timeout | timeout_seconds  seconds; the call's context bounds it too
//
// input_data is a global dict, and every key of it that is a Python
// identifier is also bound as a variable of its own (a function
// parameter, so the code may reassign it); an input named input_data is
// bound the same way, so there input_data is that input, not the map. Input and result cross the
// process boundary as JSON: the driver reads the request on stdin and
// writes the result on file descriptor 3, so print() output is free to
// go to stdout, which the tool logs at debug level and never mixes into
// the result. Values json cannot encode (dates, Decimals, ...) become
// their str(). JSON integers come back as int64 (past int64, as a float64
// where that holds them digit for digit, else as their exact decimal text), other numbers as float64.
// A result whose JSON is larger than Config.MaxResult (64 MiB by default)
// is an error Output; the tool reads the result pipe to its end either
// way, so a large result never leaves the child blocked on its write.
//
// An exception is an error Output whose Error is "Type: message" plus the
// traceback of the user's frames (file "<code>"); Data carries exception,
// message and traceback. The child's environment is the worker's without
// CURSORFLOW_CREDENTIAL_* variables: secrets stay in the keychain. It
// holds a CURSORFLOW_PROC_<id>=1 variable of the call's own: a timeout or
// a cancel kills the interpreter's process group and, where /proc exists,
// every process that inherited the variable, including one started with
// start_new_session=True. A process the code leaves running that still
// holds stdout, stderr or the result pipe 2 s after the interpreter
// exited (os.system("... &") hands the pipe on) fails the call and is
// killed the same way.
package python
