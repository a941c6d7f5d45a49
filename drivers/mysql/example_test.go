package mysql_test

import (
	"fmt"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/mysql"
)

// A host registers the driver under the kind its playbooks name; the
// engine then opens a cursor per frame. The driver renders mark, ack,
// release and dead_letter itself, per call, with the claimed keys.
func Example() {
	reg := cursor.NewRegistry()
	defer reg.Close()
	drv := mysql.New(mysql.Config{MaxOpenConns: 16})
	if err := reg.Register("mysql", drv); err != nil {
		fmt.Println(err)
		return
	}
	f := drv.Features()
	fmt.Println(reg.Kinds(), "batch:", f.BatchClaim, "lease expiry:", f.LeaseExpiry, "fencing:", f.Fencing)
	fmt.Println("rendered per call:", drv.TemplateOptions())
	// Output:
	// [mysql] batch: true lease expiry: false fencing: false
	// rendered per call: [ack release dead_letter claim_params mark]
}

// ParseCredential accepts a go-sql-driver DSN or a mysql:// URL and turns
// on what the driver needs.
func ExampleParseCredential() {
	cfg, err := mysql.ParseCredential("mysql://app@db.internal/queue")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Addr, cfg.DBName, cfg.MultiStatements, cfg.ParseTime)
	// Output:
	// db.internal:3306 queue true true
}
