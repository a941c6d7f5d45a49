package main

import (
	"log/slog"
	"testing"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/tools"
)

// The bench's playbooks are what a user would write for these drains:
// each parses, and validate has nothing to warn of (a frame-mode
// playbook that set row_concurrency, which one call a frame ignores,
// would be warned of).
func TestPlaybooksValidateClean(t *testing.T) {
	kc := tools.StaticURLs(map[string]string{"pg": "postgres://127.0.0.1/test"})
	_, creg, closer := stdwire.Registries(kc, slog.New(slog.DiscardHandler), false)
	defer closer.Close()
	c := config{slots: 8, maxRows: 100, rowConc: 4}
	for _, kind := range []string{"noop", "row", "frame", "nats-frame"} {
		pb, err := dsl.Parse("bench.yaml", []byte(playbook(c, "q", kind)))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if diags := engine.LintCursors(pb, creg); len(diags) > 0 {
			t.Errorf("%s: validate warns: %v", kind, diags)
		}
	}
}
