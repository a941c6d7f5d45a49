package clickhouse_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/clickhouse"
)

// TestConformance runs the suite against the ClickHouse server of
// CURSORFLOW_TEST_CLICKHOUSE (Debian's 18.16 in the test environment).
func TestConformance(t *testing.T) {
	cursortest.Run(t, newHarness(t, clickhouse.Config{}))
}
