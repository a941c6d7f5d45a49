package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/api"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// A host service mounts the API and dashboard under /cursorflow/ on its
// own ServeMux, next to its own routes, and starts an execution through
// it.
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
	cfg := api.Config{Engine: eng, Log: log, Token: "t0ken", Logger: slog.New(slog.DiscardHandler)}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "the host's own route") })
	mux.Handle("/cursorflow/", http.StripPrefix("/cursorflow", api.New(cfg)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	res, err := http.Get(srv.URL + "/hello")
	if err != nil {
		panic(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(res.StatusCode, string(b))

	body := `{"source": "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: demo}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n"}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/cursorflow/v1/executions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer t0ken")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(res.StatusCode, strings.Contains(string(b), `"execution_id"`))
	// Output:
	// 200 the host's own route
	// 201 true
}
