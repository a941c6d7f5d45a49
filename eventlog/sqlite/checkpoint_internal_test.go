package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
)

// appendSteps appends n events of the execution with payload bytes each,
// one per append, from seq from+1.
func appendSteps(ctx context.Context, l *Log, exec string, from, n int, payload []byte) error {
	for i := range n {
		ev := eventlog.Event{ExecutionID: exec, Type: eventlog.TypeStepCompleted, Step: fmt.Sprintf("s%d", from+i), Payload: payload}
		if _, err := l.Append(ctx, []eventlog.Event{ev}); err != nil {
			return err
		}
	}
	return nil
}

// bigPayload is a JSON payload of about n bytes (several pages: a frame's
// claimed rows).
func bigPayload(n int) []byte {
	return []byte(`{"rows":"` + strings.Repeat("x", n) + `"}`)
}

// TestWALStaysBounded: appends do not checkpoint (wal_autocheckpoint is
// off on the writer); the log's checkpointer does, and makes the WAL
// start over, so that a long run of appends does not grow it for ever.
// 1,200 appends of 16 KB write about 20 MB of events; the WAL ends well
// under half of that. Without the checkpointer it held them all (38 MB),
// and so it did with checkpoints that never held the writer slot: beside
// appends that keep coming, a checkpoint never copies all of the WAL,
// which is what lets the next append start it over.
func TestWALStaysBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	l, err := Open(t.Context(), path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n, size = 1200, 16 << 10
	if err := appendSteps(t.Context(), l, "wal-bound", 0, n, bigPayload(size)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if written := int64(n * size); fi.Size() > written/2 {
		t.Fatalf("WAL is %d MB after %d MB of appends: it does not start over", fi.Size()>>20, written>>20)
	}
}
