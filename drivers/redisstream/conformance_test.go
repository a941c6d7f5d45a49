package redisstream_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/cursor/cursortest"
	"github.com/cursorflow/cursorflow/drivers/redisstream"
)

func TestConformance(t *testing.T) {
	cursortest.Run(t, newHarness(t, redisstream.Config{}))
}
