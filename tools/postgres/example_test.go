package postgres_test

import (
	"context"
	"fmt"
	"os"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/postgres"
)

// The tool reads the connection URL from the keychain by alias; the
// playbook only ever names the alias.
func Example() {
	tool := postgres.New(postgres.Config{})
	defer tool.Close()
	kc := tools.EnvKeychain{} // CURSORFLOW_CREDENTIAL_PG_MAIN=postgres://...
	out, err := tool.Execute(context.Background(), &tools.Call{
		Keychain: kc,
		Config: map[string]any{
			"auth":    "pg_main",
			"command": "CREATE TEMP TABLE t (id int); INSERT INTO t VALUES (1), (2); SELECT count(*) AS n FROM t;",
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // unknown alias
		return
	}
	fmt.Println(out.Status, out.Data) // success map[columns:[n] row_count:1 rows:[map[n:2]]]
}
