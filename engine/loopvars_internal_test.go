package engine

import "testing"

// TestSetIterKeepsLoopBeforeSemanticsCallDone: a history recorded before
// semanticsCallDone renders its loop bodies as it did: a workload key (or
// ctx key, or step result) named loop keeps that name, as it did before
// NoETL's loop variables came; a later execution's body reads loop.index.
func TestSetIterKeepsLoopBeforeSemanticsCallDone(t *testing.T) {
	t.Parallel()
	mine := map[string]any{"table": "orders"}
	old := map[string]any{"loop": mine}
	setIter(old, "n", 1, 0, 2, false)
	if m, _ := old["loop"].(map[string]any); m["table"] != "orders" {
		t.Fatalf("without loop vars, loop = %v, want the workload's", old["loop"])
	}
	cur := map[string]any{"loop": mine}
	setIter(cur, "n", 1, 0, 2, true)
	if m, _ := cur["loop"].(map[string]any); m["index"] != 0 || m["length"] != 2 {
		t.Fatalf("with loop vars, loop = %v, want NoETL's loop variable", cur["loop"])
	}
}
