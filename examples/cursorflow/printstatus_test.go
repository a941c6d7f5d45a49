package main

import (
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
)

// A cursor loop's status line counts the rows it handed back unrun (a
// cancel kept them from starting) beside the rows it ran, so that a
// cancelled loop's numbers add up to what it claimed.
func TestStatusCountsRowsHandedBackUnrun(t *testing.T) {
	st := &engine.Status{Status: engine.StatusCancelled, Loops: map[string]engine.LoopStatus{
		"start#1": {Mode: "cursor", Finished: true, Frames: 2, Rows: 2, Cancelled: 2, Returned: 8},
	}}
	var out strings.Builder
	printStatus(&out, st)
	want := "cursor finished: frames 2, rows 2 (ok 0, failed 0, dead 0, cancelled 2, handed back unrun 8), in flight 0"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("status:\n%s\nwant a line with %q", out.String(), want)
	}
}

// run's report names the rows a loop handed back unrun when the execution
// did not complete; a completed one ran them in later claims, and says
// nothing of them.
func TestRunReportCountsRowsHandedBackUnrun(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   string // "" : no loop line
	}{
		{engine.StatusCancelled, "loop start#1: 2 row runs: 0 ok, 0 failed, 0 dead, 8 handed back unrun ("},
		{engine.StatusCompleted, ""},
	} {
		o := outcome{id: "x", status: tc.status, whereKey: "eventlog", where: "sqlite:/tmp/x.db",
			rows: map[string]loopRows{"start#1": {Rows: 2, Cancelled: 2, Returned: 8}}}
		var out strings.Builder
		o.report(&out, false)
		switch {
		case tc.want != "" && !strings.Contains(out.String(), tc.want):
			t.Errorf("%s: report:\n%s\nwant %q", tc.status, out.String(), tc.want)
		case tc.want == "" && strings.Contains(out.String(), "loop "):
			t.Errorf("%s: report:\n%s\nwant no loop line", tc.status, out.String())
		}
	}
}

// events' line for a frame.done names the rows it handed back unrun.
func TestFrameDoneTextNamesRowsReturned(t *testing.T) {
	got := strings.Join(frameDoneText([]byte(`{"counts":{"rows":2,"ok":0,"failed":2,"dead":0},"released":10,"returned":8,"cancelled":true}`)), " ")
	if want := "rows=2 ok=0 failed=2 dead=0 returned=8"; got != want {
		t.Fatalf("frame.done text %q, want %q", got, want)
	}
}
