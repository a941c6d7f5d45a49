package http_test

import (
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"

	"github.com/cursorflow/cursorflow/tools"
	cfhttp "github.com/cursorflow/cursorflow/tools/http"
)

func Example() {
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"patientId": "`+r.URL.Query().Get("patientId")+`", "page": `+r.URL.Query().Get("page")+`}`)
	}))
	defer srv.Close()

	tool := cfhttp.New(cfhttp.Config{})
	out, err := tool.Execute(context.Background(), &tools.Call{Kind: "http", Config: map[string]any{
		"method":  "GET",
		"url":     srv.URL + "/api/v1/patient/assessments",
		"params":  map[string]any{"patientId": "p-7", "page": 1.0}, // 1.0 is sent as "1"
		"timeout": 8,
	}})
	if err != nil {
		panic(err)
	}
	data := out.Data.(map[string]any)
	fmt.Println(out.Status, data["status_code"], data["data"])
	// Output:
	// success 200 map[page:1 patientId:p-7]
}
