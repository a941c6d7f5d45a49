// Package natslog logs a NATS connection's losses and recoveries, which
// nats.go reconnects through silently: an operator reading the logs of a
// stalled worker or server sees that NATS was away, and when it came back.
package natslog

import (
	"log/slog"
	"net/url"
	"strings"

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
