// Package stdwire wires the standard tools and cursor drivers into
// registries for the example binaries (CLI, quickstart, server, worker).
// Hosts embedding cursorflow do the same in their own code, registering
// only what they use.
package stdwire

import (
	"errors"
	"io"
	"log/slog"

	"github.com/cursorflow/cursorflow/cursor"
	chdriver "github.com/cursorflow/cursorflow/drivers/clickhouse"
	mysqldriver "github.com/cursorflow/cursorflow/drivers/mysql"
	natsdriver "github.com/cursorflow/cursorflow/drivers/natsconsumer"
	pgdriver "github.com/cursorflow/cursorflow/drivers/postgres"
	redisdriver "github.com/cursorflow/cursorflow/drivers/redisstream"
	s3driver "github.com/cursorflow/cursorflow/drivers/s3prefix"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
)

// Registries returns a tool registry with the builtin tools and a cursor
// registry with every driver of this module, and a closer for their
// connection pools. Drivers connect lazily, on their first cursor. code
// enables the tools that run a playbook's code or touch local files
// (python, shell, duckdb).
func Registries(kc tools.Keychain, logger *slog.Logger, code bool) (*tools.Registry, *cursor.Registry, io.Closer) {
	if logger == nil {
		logger = slog.Default()
	}
	treg, tclose := builtin.NewRegistry(builtin.Options{Keychain: kc, Logger: logger,
		EnablePython: code, EnableShell: code, EnableDuckDB: code})
	creg := cursor.NewRegistry()
	_ = creg.Register("postgres", pgdriver.New(pgdriver.Config{Logger: logger}))
	_ = creg.Register("sqlite", sqlitedriver.New(sqlitedriver.Config{Logger: logger}))
	_ = creg.Register("mysql", mysqldriver.New(mysqldriver.Config{Logger: logger}))
	_ = creg.Register("redisstream", redisdriver.New(redisdriver.Config{Logger: logger}))
	_ = creg.Register("natsconsumer", natsdriver.New(natsdriver.Config{Logger: logger}))
	_ = creg.Register("s3prefix", s3driver.New(s3driver.Config{Logger: logger}))
	_ = creg.Register("clickhouse", chdriver.New(chdriver.Config{Logger: logger}))
	return treg, creg, closers{tclose, creg}
}

type closers []io.Closer

func (c closers) Close() error {
	var errs []error
	for _, x := range c {
		if x != nil {
			errs = append(errs, x.Close())
		}
	}
	return errors.Join(errs...)
}
