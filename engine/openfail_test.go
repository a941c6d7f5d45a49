package engine_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	sqlitedriver "github.com/cursorflow/cursorflow/drivers/sqlite"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
)

// TestOpenFailureSaysItOnce: a cursor that cannot be opened fails its
// loop with a message naming the kind and the credential's alias once
// each (the driver's error already names them), never the credential.
func TestOpenFailureSaysItOnce(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo.db")
	cursors := cursor.NewRegistry()
	_ = cursors.Register("sqlite", sqlitedriver.New(sqlitedriver.Config{}))
	t.Cleanup(func() { _ = cursors.Close() })
	b := setupWith(t, engine.Config{Cursors: cursors,
		Keychain: tools.StaticURLs(map[string]string{"queue_db": "file:" + missing + "?_busy_timeout=4321"})})
	b.reg.MustRegister("noop", noop.New())
	src := header + fmt.Sprintf(`
workflow:
  - step: start
    loop:
      cursor:
        kind: sqlite
        auth: queue_db
        claim: %s
      iterator: row
      spec: {mode: cursor, max_in_flight: 1, frame: {max_rows: 10, process: frame}}
    tool: {kind: noop}
`, "SELECT id FROM jobs LIMIT 1")
	sum, _ := runPlaybook(t, b.eng, b.log, src, engine.StartOptions{}, time.Minute)
	msg := sum.Error
	if sum.Status != engine.StatusFailed || !strings.Contains(msg, "does not exist") {
		t.Fatalf("status %s, error %q: want failed, the database not existing", sum.Status, msg)
	}
	for _, word := range []string{"sqlite", "queue_db", "auth"} {
		if n := strings.Count(msg, word); n != 1 {
			t.Errorf("error %q says %q %d times, want once", msg, word, n)
		}
	}
	if strings.Contains(msg, "4321") {
		t.Errorf("error %q shows the credential", msg)
	}
	t.Logf("error: %s", msg)
}
