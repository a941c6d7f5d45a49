package tools_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/cursorflow/cursorflow/tools"
)

func ExampleRegistry() {
	reg := tools.NewRegistry()
	reg.MustRegister("echo", tools.ToolFunc(func(_ context.Context, call *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess, Data: call.Config["msg"]}, nil
	}))
	t, _ := reg.Lookup("echo")
	out, _ := t.Execute(context.Background(), &tools.Call{Kind: "echo", Config: map[string]any{"msg": "hi"}})
	fmt.Println(out.Map()["status"], out.Map()["data"])

	_, err := reg.Lookup("duckdb")
	fmt.Println(errors.Is(err, tools.ErrUnknownKind), err)
	// Output:
	// success hi
	// true tools: unknown tool kind "duckdb"
}

func ExampleChainKeychain() {
	kc := tools.ChainKeychain{
		tools.StaticURLs(map[string]string{"pg_main": "postgres://app:s3cret@db/app"}),
		tools.EnvKeychain{}, // CURSORFLOW_CREDENTIAL_<ALIAS>
	}
	c, _ := kc.Resolve(context.Background(), "pg_main")
	fmt.Println(c) // a Credential prints its alias only

	_, err := kc.Resolve(context.Background(), "pg_other")
	fmt.Println(errors.Is(err, tools.ErrCredentialNotFound), err)
	// Output:
	// credential(pg_main)
	// true tools: credential not found: alias "pg_other"
}

func ExampleRedact() {
	c := tools.Credential{Alias: "pg_main", URL: "postgres://app:s3cret@db/app"}
	fmt.Println(tools.Redact("dial postgres://app:s3cret@db/app: refused (password s3cret)", c))
	// Output:
	// dial credential(pg_main): refused (password [REDACTED])
}

func ExampleEnvKeychain_EnvName() {
	fmt.Println(tools.EnvKeychain{}.EnvName("pg-k8s.main"))
	// Output:
	// CURSORFLOW_CREDENTIAL_PG_K8S_MAIN
}
