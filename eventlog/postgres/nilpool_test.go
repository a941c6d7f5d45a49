package postgres_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/eventlog/postgres"
)

func TestNewRefusesNilPool(t *testing.T) {
	l, err := postgres.New(t.Context(), nil, postgres.Config{})
	if err == nil {
		_ = l.Close()
		t.Fatal("New with a nil pool succeeded")
	}
}
