package sqlite_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
)

func TestConformance(t *testing.T) {
	cursortest.Run(t, newHarness(t))
}
