package cursor

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// ErrTransient marks a failure that may pass by itself. A driver wraps it
// around an error of its source that Transient cannot recognise on its
// own (a code only that source's client knows).
var ErrTransient = errors.New("cursor: transient failure")

// Transient reports whether err may pass if the operation is tried again
// shortly: the source was unreachable, restarting or refusing connections
// for the moment, the connection broke, or the statement lost a deadlock
// or a serialization conflict. A statement's own error (its syntax, a
// missing table or column, a permission) is not transient, nor is a
// cancelled context. The engine retries a claim, ack or release that
// fails so for a while before it gives up on the loop.
func Transient(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, ErrClosed),
		errors.Is(err, ErrUnsupported), errors.Is(err, ErrStaleLease):
		return false
	case errors.Is(err, ErrTransient), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.ETIMEDOUT):
		return true
	}
	var state interface{ SQLState() string }
	if errors.As(err, &state) {
		return transientSQLState(state.SQLState())
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// transientSQLState reports whether a SQLSTATE names a failure that may
// pass: a connection exception (class 08), too many connections, the
// server shutting down or starting (57P01-57P03), a serialization
// failure or deadlock, a lock not available now.
func transientSQLState(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"):
		return true
	}
	switch code {
	case "53300", "57P01", "57P02", "57P03", "40001", "40P01", "55P03":
		return true
	}
	return false
}

// MarkTransient returns err marked transient (errors.Is(err,
// ErrTransient) holds), with its message unchanged; nil stays nil.
func MarkTransient(err error) error {
	if err == nil {
		return nil
	}
	return transientError{err}
}

type transientError struct{ err error }

func (e transientError) Error() string        { return e.err.Error() }
func (e transientError) Unwrap() error        { return e.err }
func (e transientError) Is(target error) bool { return target == ErrTransient }
