package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/sqlite"
)

// A cursor opened on a mistyped path fails, naming the path and saying it
// does not exist, and leaves no empty database file behind.
func TestOpenMissingDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "qeueu.db")
	drv := sqlite.New(sqlite.Config{})
	defer drv.Close()
	for _, cred := range []string{path, "sqlite:" + path, "file:" + path + "?_busy_timeout=100"} {
		cur, err := drv.Open(context.Background(), cursor.Spec{
			Kind: "sqlite", Auth: "queue_db", Credential: cred,
			Claim: compile(t, "SELECT id FROM jobs LIMIT 1"),
		})
		if err == nil {
			_, err = cur.Claim(context.Background(), 1)
			_ = cur.Close()
		}
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("credential %s: error %v, want one naming %s and saying it does not exist", cred, err, path)
		}
		if _, serr := os.Stat(path); !errors.Is(serr, fs.ErrNotExist) {
			t.Fatalf("credential %s: the cursor left a database file behind (stat: %v)", cred, serr)
		}
	}
}
