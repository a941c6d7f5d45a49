package pgretry

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestConnectionLost(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true},
		{fmt.Errorf("exec: %w", &pgconn.PgError{Code: "08006"}), true},
		{io.ErrUnexpectedEOF, true},
		{&pgconn.PgError{Code: "23505"}, false}, // unique violation: the statement's
		{&pgconn.PgError{Code: "40001"}, false}, // serialization failure: a policy's call
		{errors.New("syntax"), false},
	} {
		if got := ConnectionLost(tc.err); got != tc.want {
			t.Errorf("ConnectionLost(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
