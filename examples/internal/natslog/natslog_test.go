package natslog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestOptionsLog(t *testing.T) {
	var buf bytes.Buffer
	var o nats.Options
	for _, opt := range Options(slog.New(slog.NewTextHandler(&buf, nil))) {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	if o.DisconnectedErrCB == nil || o.ReconnectedCB == nil || o.ClosedCB == nil {
		t.Fatal("a handler is missing")
	}
	o.DisconnectedErrCB(nil, errors.New("connection reset"))
	o.ReconnectedCB(nil)
	out := buf.String()
	if !strings.Contains(out, "nats: disconnected; reconnecting") || !strings.Contains(out, "connection reset") || !strings.Contains(out, "nats: reconnected") {
		t.Fatalf("logged:\n%s", out)
	}
}
