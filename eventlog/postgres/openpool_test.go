package postgres_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// An append through Open's pool sends its payloads with one copy each
// into the statement's parameters: pgx's own encoding of a [][]byte
// copied every payload again at each doubling of a buffer that starts
// small for every statement, so a batch of large payloads allocated
// several times their size. The payloads (and an empty meta, NULL) come
// back as they were.
func TestOpenAppendCopiesPayloadsOnce(t *testing.T) {
	ctx := t.Context()
	pool := testPool(t)
	l, err := postgres.Open(ctx, testenv.Postgres(t), postgres.Config{Schema: randomSchema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	exec := logtest.ExecutionID("copies")
	const n, size = 8, 64 << 10
	batch := func(round int) []eventlog.Event {
		var evs []eventlog.Event
		for i := range n {
			p := fmt.Appendf(nil, `{"round":%d,"i":%d,"pad":"`, round, i)
			p = append(p, bytes.Repeat([]byte{'x'}, size-len(p)-2)...)
			p = append(p, `"}`...)
			e := eventlog.Event{ExecutionID: exec, Type: eventlog.TypeStepCompleted, Step: "s", Payload: json.RawMessage(p)}
			if i%2 == 0 {
				e.Meta = json.RawMessage(`{"m":` + fmt.Sprint(i) + `}`)
			}
			evs = append(evs, e)
		}
		return evs
	}
	if _, err := l.Append(ctx, batch(0)); err != nil { // prepares the statements
		t.Fatal(err)
	}
	want := batch(1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := l.Append(ctx, want); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("append of %d bytes of payloads allocated %d bytes", n*size, allocated)
	// One copy into the parameters, then pgx's into the connection's
	// write buffer, which grows by doubling (about 3 times the payloads
	// in all): not the 5 or so times of pgx's encoding of a [][]byte.
	if allocated > 4*n*size {
		t.Errorf("an append of %d bytes of payloads allocated %d bytes, want at most %d", n*size, allocated, 4*n*size)
	}
	evs, err := l.Read(ctx, exec, int64(n), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != n {
		t.Fatalf("read %d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if !bytes.Equal(e.Payload, want[i].Payload) || !bytes.Equal(e.Meta, want[i].Meta) {
			t.Errorf("event %d: payload of %d bytes, meta %q; want %d bytes, meta %q", i, len(e.Payload), e.Meta, len(want[i].Payload), want[i].Meta)
		}
	}
}
