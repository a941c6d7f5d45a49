package tools_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/tools"
)

// A nil ToolFunc is a non-nil Tool that would panic at its first call.
func TestRegisterRefusesNilToolFunc(t *testing.T) {
	r := tools.NewRegistry()
	var f tools.ToolFunc
	if err := r.Register("nilfunc", f); err == nil {
		t.Fatal("Register accepted a nil ToolFunc")
	}
	if _, err := r.Lookup("nilfunc"); err == nil {
		t.Fatal("the refused kind is registered")
	}
}
