package clickhouse_test

import (
	"fmt"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/clickhouse"
)

// A host adds ClickHouse tables as a cursor source with one Register
// call; playbooks then use `cursor: {kind: clickhouse, ...}`.
func Example() {
	reg := cursor.NewRegistry()
	if err := reg.Register("clickhouse", clickhouse.New(clickhouse.Config{})); err != nil {
		fmt.Println(err)
	}
	defer reg.Close()
}
