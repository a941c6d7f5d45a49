package natsconsumer_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/natsconsumer"
)

func TestConformance(t *testing.T) {
	cursortest.Run(t, newHarness(t, natsconsumer.Config{}))
}
