package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/apitest"
)

// TestOpenAPIMatchesRoutes keeps the document true: the (method, path)
// pairs it documents are exactly the ones the handler serves.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Errorf("openapi %q, want 3.0.x", doc.OpenAPI)
	}
	methods := []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}
	spec := map[string]bool{}
	opIDs := map[string]bool{}
	for path, item := range doc.Paths {
		for key, op := range item {
			if !slices.Contains(methods, key) {
				continue // parameters, summary, ...
			}
			spec[strings.ToUpper(key)+" "+path] = true
			id, _ := op["operationId"].(string)
			if id == "" || opIDs[id] {
				t.Errorf("%s %s: operationId %q missing or repeated", key, path, id)
			}
			opIDs[id] = true
			if _, ok := op["responses"].(map[string]any); !ok {
				t.Errorf("%s %s: no responses", key, path)
			}
		}
	}
	served := map[string]bool{}
	for _, r := range api.Routes() {
		served[r.Method+" "+r.Path] = true
	}
	for k := range spec {
		if !served[k] {
			t.Errorf("documented but not served: %s", k)
		}
	}
	for k := range served {
		if !spec[k] {
			t.Errorf("served but not documented: %s", k)
		}
	}
	// Every $ref must resolve.
	var raw map[string]any
	if err := yaml.Unmarshal(api.OpenAPI(), &raw); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				var cur any = raw
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[part]
				}
				if cur == nil {
					t.Errorf("unresolved $ref %s", ref)
				}
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(raw)
}

// TestEveryRouteServed checks the other half: each route in the table
// reaches a handler (not the 404 or 405 fallbacks), and its neighbours
// get JSON 404s and 405s.
func TestEveryRouteServed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) {
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "up 1") })
	})
	id := b.start(t, api.StartRequest{Source: echoPlaybook})
	b.waitStatus(t, id, engine.StatusCompleted)
	for _, rt := range api.Routes() {
		path := strings.ReplaceAll(rt.Path, "{id}", id)
		path = strings.ReplaceAll(path, "{name}", "nope")
		r := b.do(t, rt.Method, path, "{}")
		if r.status == http.StatusMethodNotAllowed || strings.Contains(string(r.body), "no such route") {
			t.Errorf("%s %s: not served: %d %s", rt.Method, rt.Path, r.status, r.body)
		}
	}
	r := b.do(t, http.MethodDelete, "/v1/executions/"+id, nil)
	want(t, r, http.StatusMethodNotAllowed)
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Errorf("Allow %q", allow)
	}
	r.errorBody(t)
	r = b.do(t, http.MethodPut, "/v1/playbooks", nil)
	want(t, r, http.StatusMethodNotAllowed)
	r = b.do(t, http.MethodGet, "/v2/nothing", nil)
	want(t, r, http.StatusNotFound)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("404 content type %q", ct)
	}
	r.errorBody(t)
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name, header string
		status       int
		challenge    string
	}{
		{"missing", "", http.StatusUnauthorized, `Bearer realm="cursorflow"`},
		{"wrong", "Bearer nope", http.StatusUnauthorized, `error="invalid_token"`},
		{"prefix of the right one", "Bearer " + testToken[:4], http.StatusUnauthorized, `error="invalid_token"`},
		{"right token, wrong scheme", "Basic " + testToken, http.StatusUnauthorized, `Bearer realm`},
		{"right", "Bearer " + testToken, http.StatusOK, ""},
		{"scheme case-insensitive", "bearer " + testToken, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/playbooks", "/openapi.yaml", "/v2/unknown"} {
				req, _ := http.NewRequest(http.MethodGet, b.HTTP.URL+path, nil)
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				res, err := b.HTTP.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				wantStatus := tc.status
				if path == "/v2/unknown" && tc.status == http.StatusOK {
					wantStatus = http.StatusNotFound
				}
				if res.StatusCode != wantStatus {
					t.Errorf("%s: status %d, want %d", path, res.StatusCode, wantStatus)
				}
				if got := res.Header.Get("WWW-Authenticate"); tc.challenge != "" && !strings.Contains(got, tc.challenge) {
					t.Errorf("%s: WWW-Authenticate %q, want it to contain %q", path, got, tc.challenge)
				}
			}
		})
	}
	// Health probes need no token.
	for _, path := range []string{"/healthz", "/readyz"} {
		r := b.doToken(t, "", http.MethodGet, path, nil)
		want(t, r, http.StatusOK)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	ready := make(chan error, 1)
	b := setup(t, func(c *api.Config) {
		c.Ready = func(ctx context.Context) error {
			select {
			case err := <-ready:
				return err
			default:
				return nil
			}
		}
	})
	want(t, b.doToken(t, "", http.MethodGet, "/readyz", nil), http.StatusOK)
	ready <- errors.New("postgres://user:pw@db down")
	r := b.doToken(t, "", http.MethodGet, "/readyz", nil)
	want(t, r, http.StatusServiceUnavailable)
	if strings.Contains(string(r.body), "pw@db") {
		t.Errorf("readyz leaks the reason: %s", r.body)
	}
	// Without Config.Metrics /metrics is a 404.
	want(t, b.do(t, http.MethodGet, "/metrics", nil), http.StatusNotFound)

	m := setup(t, func(c *api.Config) {
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "cursorflow_up 1") })
	})
	r = m.do(t, http.MethodGet, "/metrics", nil)
	want(t, r, http.StatusOK)
	if string(r.body) != "cursorflow_up 1\n" {
		t.Errorf("metrics body %q", r.body)
	}
	want(t, m.doToken(t, "", http.MethodGet, "/metrics", nil), http.StatusUnauthorized)

	r = m.do(t, http.MethodGet, "/openapi.yaml", nil)
	want(t, r, http.StatusOK)
	if !strings.HasPrefix(string(r.body), "openapi: 3.0") {
		t.Errorf("openapi.yaml body starts %q", r.body[:20])
	}
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	if err := (api.Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "Engine") {
		t.Fatalf("Validate() = %v, want it to name Engine", err)
	}
	srv := httptest.NewServer(api.New(api.Config{Logger: testLogger(t)}))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/v1/playbooks")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", res.StatusCode)
	}
	res, err = http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("healthz status %d", res.StatusCode)
	}
}

func TestPlaybooks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodPost, "/v1/playbooks", echoPlaybook)
	want(t, r, http.StatusCreated)
	var reg api.RegisteredPlaybook
	r.decode(t, &reg)
	if reg.Name != "echo" || reg.Version != 1 || !reg.Created || reg.RegisteredAt.IsZero() {
		t.Fatalf("registered %+v", reg)
	}
	// The same source again: unchanged.
	r = b.do(t, http.MethodPost, "/v1/playbooks", echoPlaybook)
	want(t, r, http.StatusOK)
	r.decode(t, &reg)
	if reg.Version != 1 || reg.Created {
		t.Fatalf("re-registered %+v", reg)
	}
	// A new source: version 2, with its warning.
	v2 := strings.Replace(echoPlaybook, "n: 1}", "n: 2}", 1) + "  - step: island\n    tool: {kind: echo}\n"
	r = b.do(t, http.MethodPost, "/v1/playbooks", v2)
	want(t, r, http.StatusCreated)
	r.decode(t, &reg)
	if reg.Version != 2 || len(reg.Warnings) != 1 || !strings.Contains(reg.Warnings[0].Message, "island") {
		t.Fatalf("v2 %+v", reg)
	}
	want(t, b.do(t, http.MethodPost, "/v1/playbooks", loopPlaybook), http.StatusCreated)
	// A playbook no build runs (a typo in a key) is not stored: it could
	// never start.
	typo := strings.Replace(echoPlaybook, "metadata: {name: echo}", "metadata: {name: typo}", 1) + "    nxt: [start]\n"
	r = b.do(t, http.MethodPost, "/v1/playbooks", typo)
	want(t, r, http.StatusUnprocessableEntity)
	if e := r.errorBody(t); len(e.Problems) != 1 || !strings.Contains(e.Problems[0].Message, "nxt") || e.Problems[0].Line != 8 {
		t.Fatalf("typo: %+v", e)
	}
	want(t, b.do(t, http.MethodGet, "/v1/playbooks/typo", nil), http.StatusNotFound)

	r = b.do(t, http.MethodGet, "/v1/playbooks", nil)
	want(t, r, http.StatusOK)
	var list api.PlaybookList
	r.decode(t, &list)
	if len(list.Playbooks) != 2 || list.Playbooks[0].Name != "echo" || list.Playbooks[0].Version != 2 ||
		list.Playbooks[1].Name != "loop" || list.Playbooks[0].Source != "" {
		t.Fatalf("list %+v", list)
	}

	r = b.do(t, http.MethodGet, "/v1/playbooks/echo?version=1", nil)
	want(t, r, http.StatusOK)
	var pb api.Playbook
	r.decode(t, &pb)
	if pb.Source != echoPlaybook || pb.Version != 1 {
		t.Fatalf("get v1 %+v", pb)
	}
	r = b.do(t, http.MethodGet, "/v1/playbooks/echo", nil)
	want(t, r, http.StatusOK)
	r.decode(t, &pb)
	if pb.Source != v2 {
		t.Fatalf("latest is not v2: %+v", pb)
	}
	want(t, b.do(t, http.MethodGet, "/v1/playbooks/echo?version=3", nil), http.StatusNotFound)
	want(t, b.do(t, http.MethodGet, "/v1/playbooks/echo?version=x", nil), http.StatusBadRequest)
	want(t, b.do(t, http.MethodGet, "/v1/playbooks/nope", nil), http.StatusNotFound)

	// Run a registered playbook by name, latest and pinned.
	id := b.start(t, api.StartRequest{Playbook: "echo"})
	b.waitStatus(t, id, engine.StatusCompleted)
	id = b.start(t, api.StartRequest{Playbook: "echo", Version: 1, Workload: map[string]any{"greeting": "hi"}})
	b.waitStatus(t, id, engine.StatusCompleted)
	msgs := b.Seen()
	if !slices.Equal(msgs, []string{"hello 2", "hi 1"}) {
		t.Fatalf("tool saw %q", msgs)
	}
	r = b.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Playbook: "missing"})
	want(t, r, http.StatusNotFound)
	// A playbook's YAML sent as its name is not echoed back whole.
	r = b.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Playbook: echoPlaybook})
	want(t, r, http.StatusNotFound)
	if body := string(r.body); strings.Contains(body, "workflow") || !strings.Contains(body, `goes in \"source\"`) {
		t.Fatalf("YAML sent as a name: %s", body)
	}
	// A playbook that uses a field this build does not run is refused,
	// with the position, at start as at registration.
	odd := strings.Replace(echoPlaybook, "name: echo", "name: odd", 1) + "    surprise: 1\n"
	want(t, b.do(t, http.MethodPost, "/v1/playbooks", odd), http.StatusUnprocessableEntity)
	r = b.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Source: odd})
	want(t, r, http.StatusUnprocessableEntity)
	var refused api.ErrorBody
	r.decode(t, &refused)
	if len(refused.Problems) != 1 || refused.Problems[0].Line != 8 || !strings.Contains(refused.Problems[0].Message, `unknown key "surprise"`) {
		t.Fatalf("refusal %+v", refused)
	}
	r = b.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Playbook: "echo", Version: 9})
	want(t, r, http.StatusNotFound)
	// A version that is not a whole number says what it wants.
	r = b.do(t, http.MethodPost, "/v1/executions", `{"playbook": "echo", "version": 1.5}`)
	want(t, r, http.StatusBadRequest)
	if !strings.Contains(string(r.body), `field \"version\": got a JSON number 1.5, want an integer`) {
		t.Fatalf("fractional version: %s", r.body)
	}
}

func TestPlaybookValidationErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name, body string
		want       []api.Problem
	}{
		{
			name: "invalid playbook lists every problem",
			body: header + "metadata: {name: bad}\nworkflow:\n  - step: start\n    next: [nowhere]\n",
			want: []api.Problem{
				{File: "bad.yaml", Line: 5, Col: 5, Message: "step start: tool is required", Position: "bad.yaml:5:5"},
				{File: "bad.yaml", Line: 6, Col: 12, Message: `step start: next step "nowhere" does not exist`, Position: "bad.yaml:6:12"},
			},
		},
		{
			name: "YAML syntax error",
			body: header + "metadata: {name: x\nworkflow: [\n",
		},
		{name: "empty body", body: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(t, http.MethodPost, "/v1/playbooks?file=bad.yaml", tc.body)
			want(t, r, http.StatusBadRequest)
			e := r.errorBody(t)
			if len(e.Problems) == 0 {
				t.Fatalf("no problems in %s", r.body)
			}
			for _, p := range e.Problems {
				if p.Line < 1 || p.Col < 1 || p.Message == "" || !strings.HasPrefix(p.Position, "bad.yaml:") {
					t.Errorf("problem without a position: %+v", p)
				}
			}
			if tc.want != nil && !slices.Equal(e.Problems, tc.want) {
				t.Errorf("problems\n got %+v\nwant %+v", e.Problems, tc.want)
			}
		})
	}
	// Same through POST /v1/executions with a source.
	r := b.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Source: header + "metadata: {name: bad}\nworkflow: []\n", File: "inline.yaml"})
	want(t, r, http.StatusBadRequest)
	e := r.errorBody(t)
	if len(e.Problems) == 0 || e.Problems[0].File != "inline.yaml" {
		t.Fatalf("problems %+v", e.Problems)
	}
}

// A playbook whose template nests a hundred thousand parentheses (200 KB,
// well within the body limit) overflowed the goroutine stack of the
// server validating it, a fatal error that ended the whole server
// process for every client. It is refused like any invalid playbook.
func TestDeeplyNestedTemplateRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 100_000
	tmpl := "{{ " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + " }}"
	src := header + "metadata: {name: deep}\nworkflow:\n  - step: start\n    tool: {kind: echo, msg: '" + tmpl + "'}\n"
	for _, path := range []string{"/v1/playbooks?file=deep.yaml", "/v1/executions"} {
		var body any = src
		if path == "/v1/executions" {
			body = api.StartRequest{Source: src, File: "deep.yaml"}
		}
		r := b.do(t, http.MethodPost, path, body)
		want(t, r, http.StatusBadRequest)
		if e := r.errorBody(t); len(e.Problems) != 1 || !strings.Contains(e.Problems[0].Message, "nests more than") ||
			e.Problems[0].Position != "deep.yaml:6:233" { // the 201st parenthesis
			t.Errorf("%s: problems %+v, want one saying the template nests too deep at deep.yaml:6:233", path, e.Problems)
		}
	}
}

func TestMalformedBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.MaxBody = 1024 })
	for _, tc := range []struct {
		name, path, body string
		status           int
		contains         string
	}{
		{"not JSON", "/v1/executions", `{"source": `, 400, "unexpected end"},
		{"syntax error with position", "/v1/executions", "{\n  \"source\": x}", 400, "line 2"},
		{"array body", "/v1/executions", `[1]`, 400, "want an object"},
		{"workload not an object", "/v1/executions", `{"source": "a", "workload": "x"}`, 400, `"workload"`},
		{"version not a number", "/v1/executions", `{"playbook": "a", "version": "1"}`, 400, `"version"`},
		{"unknown field", "/v1/executions", `{"sauce": "a"}`, 400, `"sauce"`},
		{"trailing data", "/v1/executions", `{"source": "a"} {}`, 400, "after the JSON object"},
		{"empty", "/v1/executions", ``, 400, "empty"},
		{"neither playbook nor source", "/v1/executions", `{"workload": {}}`, 400, "exactly one"},
		{"both playbook and source", "/v1/executions", `{"playbook": "a", "source": "b"}`, 400, "exactly one"},
		{"negative version", "/v1/executions", `{"playbook": "a", "version": -1}`, 400, "version"},
		{"too large JSON", "/v1/executions", `{"source": "` + strings.Repeat("x", 2000) + `"}`, 413, "exceeds 1024 bytes"},
		{"too large YAML", "/v1/playbooks", echoPlaybook + "#" + strings.Repeat("x", 2000), 413, "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(t, http.MethodPost, tc.path, tc.body)
			want(t, r, tc.status)
			if e := r.errorBody(t); !strings.Contains(e.Error, tc.contains) {
				t.Errorf("error %q, want it to contain %q", e.Error, tc.contains)
			}
		})
	}
	for _, q := range []string{"after=-1", "after=x", "limit=0", "limit=abc"} {
		want(t, b.do(t, http.MethodGet, "/v1/executions/x/events?"+q, nil), http.StatusBadRequest)
	}
	want(t, b.do(t, http.MethodGet, "/v1/executions?unfinished=maybe", nil), http.StatusBadRequest)
}

func TestStartWithWorkloadAndStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.start(t, api.StartRequest{Source: echoPlaybook, Workload: map[string]any{"n": 42}})
	st := b.waitStatus(t, id, engine.StatusCompleted)
	if st.ExecutionID != id || st.Playbook != "echo" || st.Steps["start"] != "completed" || st.LastSeq < 3 {
		t.Fatalf("status %+v", st)
	}
	// 42 arrives as an integer, not 42.0.
	if msgs := b.Seen(); !slices.Equal(msgs, []string{"hello 42"}) {
		t.Fatalf("tool saw %q", msgs)
	}

	id = b.start(t, api.StartRequest{Source: loopPlaybook, Workload: map[string]any{"items": []any{"a", "b", "c", "d"}}})
	st = b.waitStatus(t, id, engine.StatusCompleted)
	ls, ok := st.Loops["start#1"]
	if !ok || ls.Items != 4 || ls.Done != 4 || !ls.Finished {
		t.Fatalf("loop status %+v", st.Loops)
	}

	r := b.do(t, http.MethodGet, "/v1/executions/does-not-exist", nil)
	want(t, r, http.StatusNotFound)
	r.errorBody(t)

	r = b.do(t, http.MethodGet, "/v1/executions", nil)
	want(t, r, http.StatusOK)
	var list api.ExecutionList
	r.decode(t, &list)
	// Newest first, each with its status, playbook and times.
	if len(list.Executions) != 2 || list.Executions[0].ExecutionID != id {
		t.Fatalf("executions %+v", list.Executions)
	}
	if x := list.Executions[0]; x.Status != engine.StatusCompleted || x.Playbook != "loop" || x.StartedAt.IsZero() ||
		x.EndedAt.Before(x.StartedAt) || x.Events != st.Events {
		t.Fatalf("summary %+v", x)
	}
	r = b.do(t, http.MethodGet, "/v1/executions?unfinished=true", nil)
	want(t, r, http.StatusOK)
	r.decode(t, &list)
	if len(list.Executions) != 0 {
		t.Fatalf("unfinished %v", list.Executions)
	}
	r = b.do(t, http.MethodGet, "/v1/executions?status=completed&limit=1", nil)
	want(t, r, http.StatusOK)
	r.decode(t, &list)
	if len(list.Executions) != 1 || list.Executions[0].ExecutionID != id {
		t.Fatalf("completed, limit 1: %+v", list.Executions)
	}
	for _, q := range []string{"status=sleeping", "limit=0", "unfinished=maybe", "unfinished=true&status=failed"} {
		r = b.do(t, http.MethodGet, "/v1/executions?"+q, nil)
		want(t, r, http.StatusBadRequest)
		r.errorBody(t)
	}
}

func TestEventsPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.start(t, api.StartRequest{Source: loopPlaybook})
	st := b.waitStatus(t, id, engine.StatusCompleted)
	var all []eventlog.Event
	after := int64(0)
	for pages := 0; ; pages++ {
		if pages > int(st.LastSeq) {
			t.Fatal("paging does not end")
		}
		r := b.do(t, http.MethodGet, "/v1/executions/"+id+"/events?limit=2&after="+strconv.FormatInt(after, 10), nil)
		want(t, r, http.StatusOK)
		var page api.EventPage
		r.decode(t, &page)
		if len(page.Events) > 2 {
			t.Fatalf("page of %d events, limit 2", len(page.Events))
		}
		all = append(all, page.Events...)
		if page.Terminal {
			if page.Events[len(page.Events)-1].Type != eventlog.TypeExecutionCompleted {
				t.Fatalf("terminal page ends with %s", page.Events[len(page.Events)-1].Type)
			}
			break
		}
		if len(page.Events) == 0 {
			t.Fatal("empty page before the terminal event")
		}
		after = page.NextAfter
	}
	if int64(len(all)) != st.LastSeq {
		t.Fatalf("paged %d events, status says %d", len(all), st.LastSeq)
	}
	for i, ev := range all {
		if ev.Seq != int64(i+1) || ev.ExecutionID != id {
			t.Fatalf("event %d: seq %d execution %s", i, ev.Seq, ev.ExecutionID)
		}
	}
	// Past the end: an empty page, still 200.
	r := b.do(t, http.MethodGet, "/v1/executions/"+id+"/events?after=1000", nil)
	want(t, r, http.StatusOK)
	var page api.EventPage
	r.decode(t, &page)
	if len(page.Events) != 0 || page.NextAfter != 1000 {
		t.Fatalf("page past the end %+v", page)
	}
	want(t, b.do(t, http.MethodGet, "/v1/executions/nope/events", nil), http.StatusNotFound)
	// A huge id is named in the 404, cut short, not echoed whole.
	r = b.do(t, http.MethodGet, "/v1/executions/"+strings.Repeat("x", 100_000), nil)
	want(t, r, http.StatusNotFound)
	if len(r.body) > 1000 || !strings.Contains(string(r.body), "xxx…") {
		t.Fatalf("404 of a 100 KB id: %d bytes", len(r.body))
	}
}

func TestEventStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.start(t, api.StartRequest{Source: gatedPlaybook})
	b.waitInFlight(t, id)

	req, _ := http.NewRequest(http.MethodGet, b.HTTP.URL+"/v1/executions/"+id+"/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := b.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	type result struct {
		events   []sseEvent
		comments int
	}
	done := make(chan result, 1)
	keepalive := make(chan struct{}, 1)
	go func() {
		evs, comments := readSSENotify(t, res.Body, func() {
			select {
			case keepalive <- struct{}{}:
			default:
			}
		})
		done <- result{evs, comments}
	}()
	// The stream stays open while the execution waits, sending keepalives
	// (KeepAlive is 50ms in tests); after one, let the execution finish.
	select {
	case got := <-done:
		t.Fatalf("stream ended before the execution: %+v", got.events)
	case <-keepalive:
	case <-time.After(10 * time.Second):
		t.Fatal("no keepalive on an idle stream")
	}
	close(b.Gate)
	var got result
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not end after the terminal event")
	}
	if len(got.events) < 4 {
		t.Fatalf("events %+v", got.events)
	}
	for i, ev := range got.events {
		var e eventlog.Event
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatal(err)
		}
		if ev.id != strconv.Itoa(i+1) || e.Seq != int64(i+1) || e.Type != ev.event {
			t.Fatalf("event %d: id %s seq %d event %s type %s", i, ev.id, e.Seq, ev.event, e.Type)
		}
	}
	last := got.events[len(got.events)-1]
	if last.event != eventlog.TypeExecutionCompleted {
		t.Fatalf("stream ends with %s", last.event)
	}

	// Resuming from Last-Event-ID or ?after= sends the rest; from the
	// terminal event, or past it, it ends at once (it used to send
	// keepalives forever past it).
	lastSeq, _ := strconv.Atoi(last.id)
	for _, tc := range []struct {
		lastID, after string
		want          int
	}{
		{"2", "", len(got.events) - 2},
		{last.id, "", 0},
		{strconv.Itoa(lastSeq + 1), "", 0},
		{"", strconv.Itoa(lastSeq + 1), 0},
		{"", "1000000", 0},
	} {
		req, _ := http.NewRequest(http.MethodGet, b.HTTP.URL+"/v1/executions/"+id+"/events/stream?after="+tc.after, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		if tc.lastID != "" {
			req.Header.Set("Last-Event-ID", tc.lastID)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := b.HTTP.Client().Do(req.WithContext(ctx))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		evs, comments := readSSE(t, res.Body)
		res.Body.Close()
		ended := ctx.Err() == nil
		cancel()
		if len(evs) != tc.want || !ended || comments > 0 {
			t.Errorf("Last-Event-ID %q after %q: %d events, %d keepalives, ended before the timeout %v; want %d events and an end at once",
				tc.lastID, tc.after, len(evs), comments, ended, tc.want)
		}
	}
	want(t, b.do(t, http.MethodGet, "/v1/executions/nope/events/stream", nil), http.StatusNotFound)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.start(t, api.StartRequest{Source: gatedPlaybook})
	b.waitInFlight(t, id)
	r := b.do(t, http.MethodPost, "/v1/executions/"+id+"/cancel", nil)
	want(t, r, http.StatusAccepted)
	var c api.Cancelled
	r.decode(t, &c)
	if c.ExecutionID != id || c.Status != "cancel_requested" {
		t.Fatalf("cancel answer %+v", c)
	}
	b.waitStatus(t, id, engine.StatusCancelled)
	r = b.do(t, http.MethodPost, "/v1/executions/"+id+"/cancel", nil)
	want(t, r, http.StatusConflict)
	if e := r.errorBody(t); !strings.Contains(e.Error, "cancelled") {
		t.Errorf("conflict %q", e.Error)
	}
	want(t, b.do(t, http.MethodPost, "/v1/executions/nope/cancel", nil), http.StatusNotFound)
}

// standby is a Runner on a replica that does not drive executions.
type standby struct{}

func (standby) Start(context.Context, []byte, engine.StartOptions) (string, error) {
	return "", fmt.Errorf("replica is standby: %w", api.ErrUnavailable)
}

func (standby) Cancel(context.Context, string) error {
	return fmt.Errorf("replica is standby: %w", api.ErrUnavailable)
}

func TestStandbyRunner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A running execution in the shared log, driven by the other replica.
	id := b.start(t, api.StartRequest{Source: gatedPlaybook})
	b.waitInFlight(t, id)
	srv := httptest.NewServer(api.New(api.Config{Engine: standby{}, Log: b.Log, Token: testToken, Logger: testLogger(t)}))
	defer srv.Close()
	s := &bundle{&apitest.Server{HTTP: srv}}
	r := s.do(t, http.MethodPost, "/v1/executions", api.StartRequest{Source: echoPlaybook})
	want(t, r, http.StatusServiceUnavailable)
	r.errorBody(t)
	want(t, s.do(t, http.MethodPost, "/v1/executions/"+id+"/cancel", nil), http.StatusServiceUnavailable)
	// Reads work on a standby.
	want(t, s.do(t, http.MethodGet, "/v1/executions/"+id, nil), http.StatusOK)
	close(b.Gate)
}

// TestWorkers: GET /v1/workers lists the engine's in-process workers (an
// engine.WorkerLister), behind the token.
func TestWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	want(t, b.doToken(t, "", http.MethodGet, "/v1/workers", nil), http.StatusUnauthorized)
	r := b.do(t, http.MethodGet, "/v1/workers", nil)
	want(t, r, http.StatusOK)
	var list api.WorkerList
	r.decode(t, &list)
	if len(list.Workers) != 1 {
		t.Fatalf("workers %+v, want the engine's one", list.Workers)
	}
	w := list.Workers[0]
	if w.Pool != engine.LocalPool || w.Slots != apitest.Workers || w.Free != apitest.Workers || w.ID == "" || w.SeenAt.IsZero() {
		t.Fatalf("worker %+v", w)
	}
}

// TestStartLogNamesPlaybook: the "execution started" line names a
// registered playbook and its version, and source sent inline by its file
// alone (no empty playbook attribute).
func TestStartLogNamesPlaybook(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	b := setup(t, func(c *api.Config) { c.Logger = logger })
	want(t, b.do(t, http.MethodPost, "/v1/playbooks", echoPlaybook), http.StatusCreated)
	byName := b.start(t, api.StartRequest{Playbook: "echo"})
	inline := b.start(t, api.StartRequest{Source: echoPlaybook, File: "mine.yaml"})
	mu.Lock()
	defer mu.Unlock()
	lines := map[string]string{}
	for line := range strings.Lines(buf.String()) {
		if strings.Contains(line, `msg="execution started"`) {
			for _, id := range []string{byName, inline} {
				if strings.Contains(line, "execution_id="+id) {
					lines[id] = line
				}
			}
		}
	}
	if l := lines[byName]; !strings.Contains(l, "playbook=echo") || !strings.Contains(l, "version=1") || !strings.Contains(l, "file=echo.yaml") {
		t.Errorf("registered playbook's start logged as %q", l)
	}
	if l := lines[inline]; !strings.Contains(l, "file=mine.yaml") || strings.Contains(l, "playbook=") {
		t.Errorf("inline source's start logged as %q", l)
	}
}

// lockedWriter serialises writes to a buffer the test reads.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// signalHandler is a slog handler that closes hit when a record with
// message msg is logged.
type signalHandler struct {
	slog.Handler
	msg  string
	hit  chan struct{}
	once *sync.Once
}

func (h signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.msg) {
		h.once.Do(func() { close(h.hit) })
	}
	return h.Handler.Handle(ctx, r)
}

func (h signalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return signalHandler{h.Handler.WithAttrs(as), h.msg, h.hit, h.once}
}

// A client that opens an event stream and stops reading must not hold
// the handler for ever: once its socket buffers fill, the stream's write
// deadline ends it.
func TestEventStreamEndsForClientNotReading(t *testing.T) {
	t.Parallel()
	hit := make(chan struct{})
	logger := slog.New(signalHandler{testLogger(t).Handler(), "event stream closed: write failed", hit, &sync.Once{}})
	s := apitest.Start(t, apitest.Config{Token: testToken, Logger: logger, Configure: func(c *api.Config) {
		c.StreamWriteTimeout = 200 * time.Millisecond
	}})
	// An execution with more history than loopback's socket buffers hold
	// (about 24 MB of events), written straight to the log.
	const id = "ex-not-reading"
	big, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 8<<10)})
	evs := []eventlog.Event{{ExecutionID: id, Type: eventlog.TypeExecutionStarted, Time: time.Now()}}
	for i := range 3000 {
		evs = append(evs, eventlog.Event{ExecutionID: id, Type: eventlog.TypeStepStarted, Step: fmt.Sprintf("s%d", i), Payload: big, Time: time.Now()})
	}
	if _, err := s.Log.Append(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.HTTP.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The request, then nothing read.
	if _, err := fmt.Fprintf(conn, "GET /v1/executions/%s/events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", id, testToken); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hit:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream to a client that reads nothing was still writing after 30s")
	}
}

// Over HTTP/2 a write deadline that passes resets the stream even while
// nothing is being written: an idle event stream, quiet for longer than
// StreamWriteTimeout between keepalives, must stay open.
func TestEventStreamIdleLongerThanWriteTimeoutHTTP2(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t, apitest.Config{Token: testToken, Logger: testLogger(t), Configure: func(c *api.Config) {
		c.StreamWriteTimeout = 100 * time.Millisecond
		c.KeepAlive = 600 * time.Millisecond
	}})
	h2 := httptest.NewUnstartedServer(s.HTTP.Config.Handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	b := &bundle{s}
	id := b.start(t, api.StartRequest{Source: gatedPlaybook})
	b.waitInFlight(t, id)
	defer close(s.Gate)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, h2.URL+"/v1/executions/"+id+"/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := h2.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != http.StatusOK {
		t.Fatalf("%s %d, want HTTP/2 200", res.Proto, res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if sc.Text() == ": keepalive" {
			return // the stream outlived several write timeouts of quiet
		}
	}
	t.Fatalf("the idle stream ended before its first keepalive: %v", sc.Err())
}

// TestGuessingTokensIsLimited: a client that keeps presenting wrong
// tokens (guessing) is answered 429 once it spent its allowance, before
// its token is looked at, so even the right token waits; the dashboard's
// login counts the same way.
func TestGuessingTokensIsLimited(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.AuthFailures = 3 })
	for i := range 3 {
		if r := b.doToken(t, fmt.Sprintf("guess-%d", i), http.MethodGet, "/v1/executions", nil); r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: status %d, want 401", i, r.status)
		}
	}
	r := b.doToken(t, "guess-3", http.MethodGet, "/v1/executions", nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("fourth guess: status %d, Retry-After %q; want 429 with Retry-After", r.status, r.header.Get("Retry-After"))
	}
	if r := b.do(t, http.MethodGet, "/v1/executions", nil); r.status != http.StatusTooManyRequests {
		t.Fatalf("the right token while limited: status %d, want 429", r.status)
	}
	form := url.Values{"token": {testToken}}
	req, _ := http.NewRequest(http.MethodPost, b.HTTP.URL+"/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.HTTP.URL)
	res, err := b.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("dashboard login while limited: status %d, want 429", res.StatusCode)
	}

	// The right token from the start spends nothing.
	ok := setup(t, func(c *api.Config) { c.AuthFailures = 3 })
	for i := range 10 {
		if r := ok.do(t, http.MethodGet, "/v1/executions", nil); r.status != http.StatusOK {
			t.Fatalf("request %d with the right token: status %d", i, r.status)
		}
	}
}

// TestExecutionsPaging: a deployment with more executions than one page
// holds (1000 at most) could list only the newest; next and after walk
// every execution, newest first, each once, with or without a status.
func TestExecutionsPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	failing := header + "metadata: {name: failing}\nworkflow:\n  - step: start\n    tool: {kind: echo, msg: " + apitest.FailMsg + "}\n"
	var ids, failed []string // oldest first
	for i := range 7 {
		src := echoPlaybook
		if i%3 == 1 {
			src = failing
		}
		id := b.start(t, api.StartRequest{Source: src})
		status := engine.StatusCompleted
		if i%3 == 1 {
			status = engine.StatusFailed
			failed = append(failed, id)
		}
		b.waitStatus(t, id, status)
		ids = append(ids, id)
	}
	walk := func(query string) []string {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("%s: more than 10 pages: %v", query, got)
			}
			path := "/v1/executions?limit=2&" + query
			if after != "" {
				path += "&after=" + after
			}
			r := b.do(t, http.MethodGet, path, nil)
			want(t, r, http.StatusOK)
			var list api.ExecutionList
			r.decode(t, &list)
			for _, x := range list.Executions {
				got = append(got, x.ExecutionID)
			}
			if list.Next == "" {
				if len(list.Executions) == 2 {
					t.Fatalf("%s: a full page without next", path)
				}
				return got
			}
			after = list.Next
		}
	}
	newestFirst := func(ids []string) []string {
		r := slices.Clone(ids)
		slices.Reverse(r)
		return r
	}
	if got := walk(""); !slices.Equal(got, newestFirst(ids)) {
		t.Errorf("all executions, 2 a page: %v, want %v", got, newestFirst(ids))
	}
	if got := walk("status=failed"); !slices.Equal(got, newestFirst(failed)) {
		t.Errorf("failed executions, 2 a page: %v, want %v", got, newestFirst(failed))
	}
	r := b.do(t, http.MethodGet, "/v1/executions?after=no-such-execution", nil)
	want(t, r, http.StatusOK)
	var list api.ExecutionList
	r.decode(t, &list)
	if len(list.Executions) != 0 {
		t.Errorf("after an unknown id: %v, want none", list.Executions)
	}
	want(t, b.do(t, http.MethodGet, "/v1/executions?after="+strings.Repeat("x", engine.MaxExecutionIDLen+1), nil), http.StatusBadRequest)
}
