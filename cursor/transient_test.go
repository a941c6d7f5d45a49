package cursor_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
)

type sqlStateErr string

func (e sqlStateErr) Error() string    { return "sqlstate " + string(e) }
func (e sqlStateErr) SQLState() string { return string(e) }

func TestTransient(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error {
		return &cursor.ClaimError{Kind: "postgres", Auth: "q", Op: "claim", Err: fmt.Errorf("query: %w", err)}
	}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"nil":                     {nil, false},
		"syntax":                  {wrap(sqlStateErr("42601")), false},
		"missing table":           {wrap(sqlStateErr("42P01")), false},
		"permission":              {wrap(sqlStateErr("42501")), false},
		"cannot connect now":      {wrap(sqlStateErr("57P03")), true},
		"admin shutdown":          {wrap(sqlStateErr("57P01")), true},
		"connection failure":      {wrap(sqlStateErr("08006")), true},
		"too many connections":    {wrap(sqlStateErr("53300")), true},
		"deadlock":                {wrap(sqlStateErr("40P01")), true},
		"refused":                 {wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		"reset":                   {wrap(syscall.ECONNRESET), true},
		"bad conn":                {wrap(driver.ErrBadConn), true},
		"eof":                     {wrap(io.ErrUnexpectedEOF), true},
		"marked by its driver":    {wrap(fmt.Errorf("%w: lock wait timeout", cursor.ErrTransient)), true},
		"marked":                  {wrap(cursor.MarkTransient(errors.New("too many connections"))), true},
		"cancelled":               {wrap(context.Canceled), false},
		"unsupported":             {wrap(cursor.ErrUnsupported), false},
		"stale lease":             {wrap(cursor.ErrStaleLease), false},
		"plain error":             {wrap(errors.New("no claim statement")), false},
		"closed":                  {cursor.ErrClosed, false},
		"refused inside a closed": {wrap(fmt.Errorf("%w: %w", cursor.ErrClosed, syscall.ECONNREFUSED)), false},
	} {
		if got := cursor.Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}

func TestMarkTransient(t *testing.T) {
	t.Parallel()
	base := errors.New("lock wait timeout")
	err := cursor.MarkTransient(base)
	if err.Error() != base.Error() || !errors.Is(err, base) || !errors.Is(err, cursor.ErrTransient) {
		t.Fatalf("MarkTransient(%v) = %v: want the same message, wrapping it, and ErrTransient", base, err)
	}
	if cursor.MarkTransient(nil) != nil {
		t.Fatal("MarkTransient(nil) is not nil")
	}
}
