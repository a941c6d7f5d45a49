package mysql_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/mysql"
)

func TestConformance(t *testing.T) {
	cursortest.Run(t, cursortest.WithKnownGaps(newHarness(t, mysql.Config{}), map[string]string{
		// sqlcursor commits a claim whose statement returned only rows
		// past max_attempts at once (it buries them and claims again, so
		// that zero rows keeps meaning drained): aborting the drained
		// claim that lists them cannot take the bury back.
		"DeadReportedAfterAbortDrained": "sqlcursor commits a dead-only claim round in Claim",
	}))
}
