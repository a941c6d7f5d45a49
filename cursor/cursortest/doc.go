// Package cursortest is the conformance suite every cursor.Driver runs
// against a real source. A driver's test implements Harness (a fresh,
// isolated queue per case, plus the few source-specific operations the
// suite cannot express generically) and calls Run:
//
//	func TestConformance(t *testing.T) {
//		cursortest.Run(t, newHarness(t))
//	}
//
// The driver's Features decide which cases run: a case a driver does not
// support is reported with t.Skip and the reason, never passed silently.
// The cases are: batch claims and drain, no double claim under 16
// concurrent claimers, drain detection, redelivery after a claimer died
// mid-frame, a claimer that dies between its claim and the engine's record
// of it (Harness.ClaimAndDie: the rows come back at once for a
// transactional source, after the lease for the others), Abort giving
// rows back, Commit keeping them claimed, poison rows to the dead letter,
// a row listed dead by a claim that is then aborted listed dead again by a
// committed claim (with rows, and drained), dead-lettering on the
// engine's request, reconnect after the server
// dropped the connections, claim templates (__frame_max_rows,
// __worker_slot_id, __worker_slot_index), stale lease tokens and use
// after Close. A driver known to fail a case names it with WithKnownGaps,
// which skips it saying why.
package cursortest
