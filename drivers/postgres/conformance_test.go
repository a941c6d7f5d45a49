package postgres_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/postgres"
)

func TestConformance(t *testing.T) {
	cursortest.Run(t, newHarness(t, postgres.Config{}))
}
