package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestRecordedPlaybookThisBuildRefuses: after an upgrade, the server
// reads an execution an earlier release started with a playbook this
// build refuses (max_in_flight over the bound added since). Its status
// answered 400 "playbook is invalid", as if the request had sent a bad
// playbook. It answers 409 saying the recorded playbook is refused and
// where to finish the execution, with the diagnostics.
func TestRecordedPlaybookThisBuildRefuses(t *testing.T) {
	b := setup(t)
	recordRefusedPlaybook(t, b)
	r := b.do(t, http.MethodGet, "/v1/executions/from-older", nil)
	want(t, r, http.StatusConflict)
	body := r.errorBody(t)
	if !strings.Contains(body.Error, "finish it with that release") || len(body.Problems) != 1 || !strings.Contains(body.Problems[0].Message, "max_in_flight") {
		t.Errorf("error body %+v, want the refusal, what to do and the diagnostic", body)
	}
}

// TestRecordedPlaybookSourceServed: the execution an earlier release
// started with a playbook this build refuses cannot be folded, but its
// source is on record, and GET /v1/executions/{id}/playbook is there to
// show it with what validating it finds today (problems: the source no
// longer validates, after an upgrade). It answered 409 like the status,
// so the operator told to finish it with that release could not see
// which playbook, nor why.
func TestRecordedPlaybookSourceServed(t *testing.T) {
	b := setup(t)
	book := recordRefusedPlaybook(t, b)
	r := b.do(t, http.MethodGet, "/v1/executions/from-older/playbook", nil)
	want(t, r, http.StatusOK)
	var got api.ExecutionPlaybook
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Source != book || got.File != "wide.yaml" || len(got.Problems) != 1 || !strings.Contains(got.Problems[0].Message, "max_in_flight") {
		t.Errorf("answer %+v, want the recorded source with its problem", got)
	}
}

// recordRefusedPlaybook records, as execution "from-older", the start of
// an execution an earlier release made with a playbook this build refuses
// (max_in_flight over the bound added since), and returns its source.
func recordRefusedPlaybook(t *testing.T, b *bundle) string {
	t.Helper()
	book := header + "metadata: {name: wide}\nworkflow:\n  - step: start\n    loop:\n      in: [1, 2]\n      iterator: n\n" +
		"      spec: {mode: parallel, max_in_flight: 20000}\n    tool: {kind: echo, msg: x}\n"
	started, _ := json.Marshal(map[string]any{"playbook": book, "file": "wide.yaml", "semantics": 1})
	if _, err := b.Log.Append(t.Context(), []eventlog.Event{{ExecutionID: "from-older", Type: eventlog.TypeExecutionStarted, Payload: started}}); err != nil {
		t.Fatal(err)
	}
	return book
}
