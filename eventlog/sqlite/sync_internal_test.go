package sqlite

import (
	"path/filepath"
	"testing"
)

// TestCommitsReachTheDisk: the log's writer commits with synchronous=FULL
// unless told otherwise, so an append that returned survives a crash of
// the machine; with NORMAL a helper's forced file-system abort lost a
// whole execution's events while its source held the rows it had run.
func TestCommitsReachTheDisk(t *testing.T) {
	for _, c := range []struct {
		set  string
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", 2}, {SyncFull, 2}, {"normal", 1}} {
		l, err := Open(t.Context(), filepath.Join(t.TempDir(), "events.db"), Config{Synchronous: c.set})
		if err != nil {
			t.Fatal(err)
		}
		// The writer's own connection, as an append holds it.
		l.slot <- struct{}{}
		var got int
		err = l.w.conn.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&got)
		<-l.slot
		_ = l.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("Synchronous %q: the writer runs with synchronous=%d, want %d", c.set, got, c.want)
		}
	}
	if _, err := Open(t.Context(), filepath.Join(t.TempDir(), "events.db"), Config{Synchronous: "off"}); err == nil {
		t.Error("Synchronous off: opened, want an error naming the values")
	}
}
