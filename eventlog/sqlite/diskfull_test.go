package sqlite_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
)

// smallDisk mounts a tmpfs of size bytes and returns its directory; it
// skips the test when it cannot (not root, no mount).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("filling a disk needs a small tmpfs, which needs root: skipped")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount a %s tmpfs: %v: %s", size, err, out)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// TestAppendOnAFullDiskNamesTheFile: an append to a log whose disk is
// full fails with an error that names the log's file and the cause, so
// the operator knows which disk to free (a host may hold several logs,
// and the engine's and the CLI's messages carry only this error); once
// space is freed the same Log appends again, and the file is intact.
func TestAppendOnAFullDiskNamesTheFile(t *testing.T) {
	dir := smallDisk(t, "1m")
	ctx := t.Context()
	path := filepath.Join(dir, "events.db")
	l := open(t, path, sqlite.Config{})
	exec := logtest.ExecutionID("diskfull")
	if _, err := l.Append(ctx, []eventlog.Event{{ExecutionID: exec, Type: eventlog.TypeExecutionStarted}}); err != nil {
		t.Fatal(err)
	}
	// Another file takes the rest of the disk: the log is what finds it full.
	filler := filepath.Join(dir, "filler")
	payload := []byte(`{"x":"` + strings.Repeat("a", 16<<10) + `"}`)
	var appendErr error
	for i := 0; i < 200 && appendErr == nil; i++ {
		_, appendErr = l.Append(ctx, []eventlog.Event{{ExecutionID: exec, Type: eventlog.TypeCommandIssued,
			CommandID: fmt.Sprintf("c%d", i), Payload: payload}})
		if i == 20 {
			f, err := os.Create(filler)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.Write(bytes.Repeat([]byte{0}, 1<<20)) // short write once full: wanted
			_ = f.Close()
		}
	}
	if appendErr == nil {
		t.Fatal("appends to a full disk all succeeded")
	}
	if msg := appendErr.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "full") {
		t.Fatalf("append on a full disk: %q: want the log's path %s and the cause", msg, path)
	}
	if !errors.Is(appendErr, eventlog.ErrUnavailable) {
		t.Fatalf("append on a full disk: %v: want eventlog.ErrUnavailable (the API's 503), as for a read", appendErr)
	}
	if errors.Is(appendErr, eventlog.ErrClosed) {
		t.Fatalf("append on a full disk: %v: the log is not closed", appendErr)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, []eventlog.Event{{ExecutionID: exec, Type: eventlog.TypeCommandIssued, CommandID: "after"}}); err != nil {
		t.Fatalf("append once space is freed: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
}

// TestOpenOnAReadOnlyFileSystemNamesTheFile: a log on a file system that
// went read-only (ext4's errors=remount-ro, a full disk's remedy gone
// wrong) fails to open with an error naming the file: SQLite's own
// "unable to open database file" does not say which.
func TestOpenOnAReadOnlyFileSystemNamesTheFile(t *testing.T) {
	dir := smallDisk(t, "1m")
	path := filepath.Join(dir, "events.db")
	l, err := sqlite.Open(t.Context(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Skipf("remount read-only: %v: %s", err, out)
	}
	l, err = sqlite.Open(t.Context(), path, sqlite.Config{})
	if err == nil {
		_ = l.Close()
		t.Fatal("Open on a read-only file system succeeded")
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("Open on a read-only file system: %q: want the log's path %s", err, path)
	}
}

// TestOpenOnAFullDiskSaysSo: a log no process holds open, on a disk that
// filled meanwhile, fails to open (SQLite must create its -shm file) with
// an error naming the file and the likely cause, where SQLite says only
// "disk I/O error (4874)".
func TestOpenOnAFullDiskSaysSo(t *testing.T) {
	dir := smallDisk(t, "1m")
	path := filepath.Join(dir, "events.db")
	l, err := sqlite.Open(t.Context(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 4<<10); ; {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	_ = f.Close()
	l, err = sqlite.Open(t.Context(), path, sqlite.Config{})
	if err == nil {
		_ = l.Close()
		t.Skip("SQLite opened the log on a full disk: nothing to explain")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "disk full") {
		t.Fatalf("Open on a full disk: %q: want the log's path %s and the cause", msg, path)
	}
}
