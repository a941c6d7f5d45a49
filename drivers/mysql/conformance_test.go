package mysql_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/mysql"
)

func TestConformance(t *testing.T) {
	cursortest.Run(t, newHarness(t, mysql.Config{}))
}
