// Package faultpoint kills the process at named points of the engine, for
// the chaos tests that prove what survives a crash between any two steps.
//
// Hit(name) is a no-op unless the binary is built with the build tag
// faultpoint (go build -tags faultpoint), so normal builds carry no cost
// and no way to trigger it. In a faultpoint build, Hit SIGKILLs (or, with
// CURSORFLOW_FAULTPOINT_ACTION=stop, SIGSTOPs) the
// process when the environment variable CURSORFLOW_FAULTPOINT names the
// point and the point has been reached CURSORFLOW_FAULTPOINT_AFTER times
// (default 1). Before dying it appends "name pid" to the file
// CURSORFLOW_FAULTPOINT_MARK, if set, so a test can check that its fault
// fired, and where.
//
// The points:
//
//	frame.claimed       a worker claimed a frame; its frame.claimed is not reported yet
//	frame.recorded      the frame.claimed record is durable; the claim is not committed yet
//	frame.row           a frame's row body ran; the next row has not started (process: row)
//	frame.ran           a frame's rows ran and were acked; frame.done is not reported yet
//	orchestrator.appended  the orchestrator appended a batch; its commands are not dispatched yet
package faultpoint

// Points, as Hit names them.
const (
	FrameClaimed         = "frame.claimed"
	FrameRecorded        = "frame.recorded"
	FrameRow             = "frame.row"
	FrameRan             = "frame.ran"
	OrchestratorAppended = "orchestrator.appended"
)

// The environment variables that arm a point in a faultpoint build.
const (
	// EnvPoint names the point to fire.
	EnvPoint = "CURSORFLOW_FAULTPOINT"
	// EnvAfter is the hit of the point that fires (1 if unset).
	EnvAfter = "CURSORFLOW_FAULTPOINT_AFTER"
	// EnvMark names a file that gets "point pid" appended before the kill.
	EnvMark = "CURSORFLOW_FAULTPOINT_MARK"
	// EnvAction, set to ActionStop, has the point SIGSTOP the process
	// instead of killing it: a paused process (a frozen VM, a debugger)
	// whose connections stay open.
	EnvAction = "CURSORFLOW_FAULTPOINT_ACTION"
)

// ActionStop is the EnvAction that stops the process rather than kills it.
const ActionStop = "stop"
