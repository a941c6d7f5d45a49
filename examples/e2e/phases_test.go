package e2e_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/resulttest"
)

// bigResultPlaybook makes a 5 MB postgres result, routes on it on the
// server, reads it on a labelled worker and streams row batches.
const bigResultPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: e2e-big-result}
workflow:
  - step: start
    tool: {kind: postgres, auth: pg, query: "SELECT repeat('x', 5000000) AS blob"}
    next:
      - step: check
        when: '{{ start.rows[0].blob | length == 5000000 }}'
  - step: check
    spec: {worker_labels: {zone: eu}}
    tool:
      kind: postgres
      auth: pg
      query: "SELECT {{ start.rows[0].blob | length }} AS len, n FROM generate_series(1, 250) AS n"
`

// TestLargeResultsLabelsAndPartials runs a server and two workers (one
// labelled zone=eu) as processes, over NATS with the S3 result store: the
// workers are listed at GET /v1/workers, a 5 MB result travels as a
// reference (no event holds it), the labelled step runs on the labelled
// worker, and its row batches stream as call.partial events.
func TestLargeResultsLabelsAndPartials(t *testing.T) {
	e := newEnv(t, 1)
	serverBin, workerBin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	store := resulttest.S3(t, e.schema)

	addr := freeAddr(t)
	srv := &replica{proc: start(t, "server", serverBin, "--listen", addr, "--eventlog", e.dsn, "--schema", e.schema,
		"--nats", e.natsURL, "--prefix", e.prefix, "--token", e.token, "--result-store", store), addr: addr, token: e.token}
	srv.waitHealthy(ctx, t)
	leaderOf(ctx, t, []*replica{srv})
	worker := func(name string, extra ...string) {
		args := append([]string{"--nats", e.natsURL, "--prefix", e.prefix, "--id", name, "--concurrency", "2",
			"--credential", "pg=" + e.dsn, "--result-store", store, "--capacity-every", "200ms"}, extra...)
		start(t, name, workerBin, args...)
	}
	worker("plain-1")
	worker("eu-1", "--label", "zone=eu")

	list := srv.waitWorkers(ctx, t, 2)
	for _, w := range list.Workers {
		if w.Slots != 2 || (w.ID == "eu-1") != (w.Labels["zone"] == "eu") {
			t.Fatalf("worker %+v", w)
		}
	}

	var started api.Started
	if _, err := srv.do(ctx, http.MethodPost, "/v1/executions", api.StartRequest{Source: bigResultPlaybook, File: "big.yaml"}, &started); err != nil {
		t.Fatal(err)
	}
	// Follow the event stream as a client would, from the start.
	partials, workerOf, terminal := 0, map[string]string{}, ""
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+srv.addr+"/v1/executions/"+started.ExecutionID+"/events/stream?after=0", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		typ, ok := strings.CutPrefix(line, "event: ")
		if !ok {
			continue
		}
		switch {
		case typ == "call.partial":
			partials++
		case eventlog.IsTerminal(typ):
			terminal = typ
		}
		if terminal != "" {
			break
		}
	}
	if terminal != "execution.completed" {
		t.Fatalf("the stream ended with %q (scan error %v)", terminal, sc.Err())
	}
	if partials < 3 {
		t.Fatalf("%d call.partial events in the stream, want the check step's 3 row batches", partials)
	}
	rows, err := e.pool.Query(ctx, `SELECT step, type, worker_id, octet_length(payload::text) FROM `+e.schema+`.events
		WHERE execution_id = $1 ORDER BY seq`, started.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	total, largest := 0, 0
	for rows.Next() {
		var step, typ, worker *string
		var size *int
		if err := rows.Scan(&step, &typ, &worker, &size); err != nil {
			t.Fatal(err)
		}
		if size != nil {
			total += *size
			largest = max(largest, *size)
		}
		if typ != nil && *typ == "command.completed" && step != nil && worker != nil {
			workerOf[*step] = *worker
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if workerOf["check"] != "eu-1" {
		t.Fatalf("check ran on %q, want the labelled eu-1", workerOf["check"])
	}
	if largest > 16<<10 {
		t.Fatalf("the largest event payload is %d bytes: the 5 MB result is in the log", largest)
	}
	var status struct {
		Steps map[string]string `json:"steps"`
	}
	if _, err := srv.do(ctx, http.MethodGet, "/v1/executions/"+started.ExecutionID, nil, &status); err != nil {
		t.Fatal(err)
	}
	if status.Steps["start"] != "completed" || status.Steps["check"] != "completed" {
		t.Fatalf("status steps %v", status.Steps)
	}
	t.Logf("5 MB result through NATS with the S3 store: %d event payload bytes for the execution (largest %d), %d call.partial events, check on %s",
		total, largest, partials, workerOf["check"])
}
