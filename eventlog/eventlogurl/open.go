package eventlogurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
)

// ErrUnsupportedURL is wrapped by Open's error for a URL whose scheme names
// no backend.
var ErrUnsupportedURL = errors.New("eventlogurl: unsupported event log URL")

// SchemaParam is the query parameter of a postgres URL that names the
// schema holding the log (postgres.Config.Schema); Open removes it before
// connecting.
const SchemaParam = "eventlog_schema"

// Open opens the log that rawURL names:
//
//	memory:                                  eventlog.NewMemory()
//	sqlite:PATH, sqlite://PATH               sqlite.Open(PATH) with default Config
//	postgres://..., postgresql://...         postgres.Open with default Config;
//	                                         ?eventlog_schema=NAME sets the schema
//
// The caller closes the returned log.
func Open(ctx context.Context, rawURL string) (eventlog.Log, error) {
	return open(ctx, rawURL, false, false)
}

// OpenExisting is Open for a log that must be there already (a resume, a
// status): a sqlite path with no file, or a postgres schema without the
// log's tables, is an error wrapping eventlog.ErrNoLog rather than a new,
// empty log. A memory: log is always new.
func OpenExisting(ctx context.Context, rawURL string) (eventlog.Log, error) {
	return open(ctx, rawURL, true, false)
}

// OpenReadOnly is OpenExisting for a reader that must not write (a
// status, an events listing): a sqlite log is opened with
// sqlite.Config.ReadOnly, so it opens on a full disk or a read-only file
// system, and its Append fails. A postgres log is opened as by
// OpenExisting.
func OpenReadOnly(ctx context.Context, rawURL string) (eventlog.Log, error) {
	return open(ctx, rawURL, true, true)
}

func open(ctx context.Context, rawURL string, mustExist, readOnly bool) (eventlog.Log, error) {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok {
		return nil, fmt.Errorf("%w: %q has no scheme", ErrUnsupportedURL, redact(rawURL))
	}
	switch strings.ToLower(scheme) {
	case "memory":
		return eventlog.NewMemory(), nil
	case "sqlite":
		path := strings.TrimPrefix(rest, "//")
		if path == "" {
			return nil, fmt.Errorf("%w: sqlite URL without a path", ErrUnsupportedURL)
		}
		if mustExist {
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", eventlog.ErrNoLog, path, err)
			}
		}
		return sqlite.Open(ctx, path, sqlite.Config{ReadOnly: readOnly})
	case "postgres", "postgresql":
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupportedURL, redactErr(err, rawURL))
		}
		cfg := postgres.Config{MustExist: mustExist}
		if q := u.Query(); q.Has(SchemaParam) {
			cfg.Schema = q.Get(SchemaParam)
			u.RawQuery = withoutParam(u.RawQuery, SchemaParam)
		}
		return postgres.Open(ctx, u.String(), cfg)
	}
	return nil, fmt.Errorf("%w: scheme %q (want memory, sqlite, postgres or postgresql)", ErrUnsupportedURL, scheme)
}

// withoutParam returns rawQuery without its name=... parameters, every
// other one kept byte for byte: re-encoding the query (url.Values.Encode)
// would turn %20 into +, which the driver does not read as a space
// (options=-c%20statement_timeout%3D5s would break).
func withoutParam(rawQuery, name string) string {
	var kept []string
	for _, p := range strings.Split(rawQuery, "&") {
		key, _, _ := strings.Cut(p, "=")
		if k, err := url.QueryUnescape(key); err == nil && k == name {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "&")
}

// Redact returns an event log URL fit for messages: its password, if
// any, replaced by "xxxxx" (url.URL.Redacted).
func Redact(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw // sqlite:PATH, memory:
	}
	return redact(raw)
}

// redact hides a URL's password so that it never reaches an error.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "<unparsable URL>"
}

func redactErr(err error, raw string) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error() // url.Error repeats the URL, password included
	}
	return strings.ReplaceAll(err.Error(), raw, "<url>")
}
