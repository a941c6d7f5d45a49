package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/tools"
)

// Serve the API for an in-process engine and start an execution.
func Example() {
	log := eventlog.NewMemory()
	reg := tools.NewRegistry()
	reg.MustRegister("noop", tools.ToolFunc(func(ctx context.Context, c *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	eng, err := engine.New(engine.Config{Log: log, Tools: reg})
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	cfg := api.Config{Engine: eng, Log: log, Token: "t0ken"}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(api.New(cfg))
	defer srv.Close()

	body := `{"source": "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: demo}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n"}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/executions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer t0ken")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, strings.Contains(string(b), `"execution_id"`))
	// Output: 201 true
}
