package cursor_test

import (
	"errors"
	"fmt"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/postgres"
	"github.com/cursorflow/cursorflow/drivers/sqlite"
)

// A host wires the drivers it wants, one Register call each, and hands
// the registry to the engine. Connections are opened lazily, on the first
// claim of each credential.
func ExampleRegistry() {
	reg := cursor.NewRegistry()
	defer reg.Close() // closes every driver's connections

	if err := reg.Register("postgres", postgres.New(postgres.Config{MaxConns: 16})); err != nil {
		fmt.Println(err)
	}
	if err := reg.Register("sqlite", sqlite.New(sqlite.Config{})); err != nil {
		fmt.Println(err)
	}
	fmt.Println(reg.Kinds())

	d, _ := reg.Lookup("postgres")
	fmt.Println("batch claims:", d.Features().BatchClaim)

	_, err := reg.Lookup("mongodb")
	fmt.Println(errors.Is(err, cursor.ErrUnknownKind))
	fmt.Println(err)

	err = reg.Register("sqlite", sqlite.New(sqlite.Config{}))
	fmt.Println(errors.Is(err, cursor.ErrDuplicateKind))
	// Output:
	// [postgres sqlite]
	// batch claims: true
	// true
	// cursor: unknown kind "mongodb" (registered: [postgres sqlite])
	// true
}
