package builtin_test

import (
	"context"
	"fmt"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
	"github.com/cursorflow/cursorflow/tools/fn"
)

func Example() {
	reg, closer := builtin.NewRegistry(builtin.Options{Keychain: tools.EnvKeychain{}})
	defer closer.Close()
	// The host adds its own kinds next to the built-in ones.
	reg.MustRegister("enrich", fn.New(func(ctx context.Context, call *tools.Call) (any, error) {
		return map[string]any{"ok": true}, nil
	}))
	fmt.Println(reg.Kinds())
	// Output:
	// [duckdb enrich http nats noop postgres python secrets shell]
}
