// Package drivertest holds the test scaffolding the cursor drivers under
// drivers/ share: [Drain] runs a drain playbook through a real in-process
// engine with one driver registered and hands back what the source-side
// checks need, and the small helpers ([FrameItems], [ExpectEachOnceOK],
// [SeqKeys], [Strings], [StatusOptions]) replace code that every driver's
// harness and end-to-end test would otherwise repeat. [Bodies] is a host
// tool that keeps what a loop's body was given, for comparison with what
// the claim recorded ([ClaimedValues]).
//
// It is internal: the exported suite for driver authors is
// [github.com/cursorflow/cursorflow/cursor/cursortest]; this package only
// removes repetition from this repository's own driver tests.
package drivertest
