package natsconsumer_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/natsconsumer"
)

func TestConformance(t *testing.T) {
	// Claim publishes messages past max_attempts to the dead-letter
	// subject and terminates them before the engine records them: a claim
	// whose record fails leaves them dead-lettered and unreported.
	const buriedInClaim = "Claim dead-letters and terminates messages past max_attempts before the engine records them"
	cursortest.Run(t, cursortest.WithKnownGaps(newHarness(t, natsconsumer.Config{}), map[string]string{
		"DeadReportedAfterAbort":        buriedInClaim,
		"DeadReportedAfterAbortDrained": buriedInClaim,
	}))
}
