// Package natslog logs a NATS connection's losses and recoveries, which
// nats.go reconnects through silently: an operator reading the logs of a
// stalled worker or server sees that NATS was away, and when it came back.
package natslog

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// Options returns the nats.Connect options that log, on logger, each
// disconnection (a warning, with its error), reconnection and final close.
// Closing the connection on purpose (a shutdown) is not a disconnection:
// nats.go reports it to the disconnect handler too, but nothing
// reconnects, so it is logged at debug level only.
func Options(logger *slog.Logger) []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc != nil && nc.IsClosed() {
				logger.Debug("nats: disconnected; connection closed", "error", err)
				return
			}
			logger.Warn("nats: disconnected; reconnecting", "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logger.Info("nats: reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				logger.Warn("nats: connection closed", "error", err)
			}
		}),
	}
}

// Connect connects to NATS at urls (comma-separated, as nats.Connect takes
// them) with Options' logging, opts, and no limit on reconnections. While
// no server answers (a worker or server started before NATS, as a compose
// file or a cluster's restart orders them) it keeps trying, every
// reconnect wait (nats.ReconnectWait in opts, else nats.go's 2 s), and
// says so once at warning level, until a server answers or ctx ends;
// then it returns ctx's error. A URL nats.go cannot parse fails at once.
func Connect(ctx context.Context, urls string, logger *slog.Logger, opts ...nats.Option) (*nats.Conn, error) {
	connected := make(chan struct{})
	var once sync.Once
	all := append(Options(logger), opts...)
	all = append(all, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		// Called once the first connection is made, also when that took
		// retries (reconnections go to the ReconnectHandler).
		nats.ConnectHandler(func(*nats.Conn) { once.Do(func() { close(connected) }) }))
	nc, err := nats.Connect(urls, all...)
	if err != nil {
		return nil, err
	}
	if nc.IsConnected() {
		return nc, nil
	}
	attrs := []any{"url", Where(urls)}
	if err := nc.LastError(); err != nil {
		attrs = append(attrs, "error", err)
	}
	logger.Warn("nats: no server answers yet; retrying until one does", attrs...)
	select {
	case <-connected:
		logger.Info("nats: connected", "url", nc.ConnectedUrlRedacted())
		return nc, nil
	case <-ctx.Done():
		// Given up on purpose: not a connection closed by trouble.
		nc.SetClosedHandler(nil)
		nc.Close()
		return nil, ctx.Err()
	}
}

// Where returns a NATS URL list (comma-separated, as nats.Connect takes
// it) fit for messages: each URL's password, if any, replaced by "xxxxx",
// and so is a user given without a password, which nats.go sends as the
// connection's auth token.
func Where(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := url.Parse(p); err == nil {
			if u.User != nil {
				if _, hasPassword := u.User.Password(); !hasPassword {
					u.User = url.User("xxxxx")
				}
			}
			parts[i] = u.Redacted()
		} else {
			parts[i] = "<unparsable URL>"
		}
	}
	return strings.Join(parts, ",")
}
