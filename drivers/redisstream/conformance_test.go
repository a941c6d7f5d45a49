package redisstream_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/redisstream"
)

func TestConformance(t *testing.T) {
	// The claim script moves entries past max_attempts to the dead-letter
	// stream and acks them in Claim, before the engine records them: a
	// claim whose record fails leaves them dead-lettered and unreported.
	const buriedInClaim = "the claim script dead-letters and acks entries past max_attempts before the engine records them"
	cursortest.Run(t, cursortest.WithKnownGaps(newHarness(t, redisstream.Config{}), map[string]string{
		"DeadReportedAfterAbort":        buriedInClaim,
		"DeadReportedAfterAbortDrained": buriedInClaim,
	}))
}
