// Package pgretry tells the PostgreSQL errors that mean a lost connection
// from those of a statement, for the callers that run a statement once
// more on a fresh connection.
package pgretry

import (
	"errors"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ConnectionLost reports errors that mean the connection, not the
// statement, failed: nothing was sent, the server closed the connection,
// or it ended the session (57P01 admin_shutdown, 57P02 crash_shutdown,
// 57P03 cannot_connect_now, class 08 connection exceptions), as a
// restart, a failover, pg_terminate_backend or a proxy timeout do. The
// server rolls back what such a session had not committed.
func ConnectionLost(err error) bool {
	if pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
	}
	return false
}

// ConnectTimeout bounds a new connection, its TCP connect, TLS and
// startup together, where the connection string does not set
// connect_timeout (nor PGCONNECT_TIMEOUT the environment): pgx waits for
// ever by default, so a server that accepts and never answers (a frozen
// process, a silent proxy) held a claim, a tool call or an engine's start
// until its context ended, if it ever did.
const ConnectTimeout = 10 * time.Second

// BoundConnect sets ConnectTimeout on cfg, parsed from connString, unless
// the connection string or the environment chose a timeout.
func BoundConnect(cfg *pgconn.Config, connString string) {
	if cfg.ConnectTimeout == 0 && !strings.Contains(connString, "connect_timeout") {
		cfg.ConnectTimeout = ConnectTimeout
	}
}
