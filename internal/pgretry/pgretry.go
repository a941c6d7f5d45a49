// Package pgretry tells the PostgreSQL errors that mean a lost connection
// from those of a statement, for the callers that run a statement once
// more on a fresh connection.
package pgretry

import (
	"errors"
	"io"
	"strings"

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
