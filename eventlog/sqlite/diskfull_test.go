package sqlite_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestAppendOnAFullDiskNamesTheFile: an append to a log whose disk is
// full fails with an error that names the log's file and the cause, so
// the operator knows which disk to free (a host may hold several logs,
// and the engine's and the CLI's messages carry only this error); once
// space is freed the same Log appends again, and the file is intact.
func TestAppendOnAFullDiskNamesTheFile(t *testing.T) {
	dir := testenv.SmallDisk(t, "1m")
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
	dir := testenv.SmallDisk(t, "1m")
	path := filepath.Join(dir, "events.db")
	if err := open(t, path, sqlite.Config{}).Close(); err != nil {
		t.Fatal(err)
	}
	testenv.RemountReadOnly(t, dir)
	l, err := sqlite.Open(t.Context(), path, sqlite.Config{})
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
	dir := testenv.SmallDisk(t, "1m")
	path := filepath.Join(dir, "events.db")
	if err := open(t, path, sqlite.Config{}).Close(); err != nil {
		t.Fatal(err)
	}
	testenv.FillDisk(t, filepath.Join(dir, "filler"))
	l, err := sqlite.Open(t.Context(), path, sqlite.Config{})
	if err == nil {
		_ = l.Close()
		t.Skip("SQLite opened the log on a full disk: nothing to explain")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "disk full") {
		t.Fatalf("Open on a full disk: %q: want the log's path %s and the cause", msg, path)
	}
}

// readOnlyFixture writes a log of one finished and one running execution
// at path and closes it, as a run that ended (or was interrupted) leaves
// it: no process holds it open, and its -wal and -shm files are gone.
func readOnlyFixture(t *testing.T, path string) (done, running string) {
	t.Helper()
	l := open(t, path, sqlite.Config{})
	done, running = logtest.ExecutionID("done"), logtest.ExecutionID("running")
	if _, err := l.Append(t.Context(), []eventlog.Event{
		{ExecutionID: done, Type: eventlog.TypeExecutionStarted},
		{ExecutionID: done, Type: eventlog.TypeExecutionCompleted},
		{ExecutionID: running, Type: eventlog.TypeExecutionStarted},
		{ExecutionID: running, Type: eventlog.TypeCommandIssued, CommandID: "c1"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return done, running
}

// checkReadOnly reads the fixture's log through l and checks that it
// refuses writes.
func checkReadOnly(t *testing.T, l *sqlite.Log, done, running string) {
	t.Helper()
	evs, err := l.Read(t.Context(), running, 0, 0)
	if err != nil || len(evs) != 2 || evs[1].CommandID != "c1" {
		t.Fatalf("Read = %+v, %v: want the running execution's 2 events", evs, err)
	}
	if ids, err := l.Executions(t.Context(), eventlog.ExecutionsQuery{Unfinished: true}); err != nil || len(ids) != 1 || ids[0] != running {
		t.Fatalf("Executions(unfinished) = %v, %v: want [%s]", ids, err, running)
	}
	if evs, err := l.Read(t.Context(), done, 0, 0); err != nil || len(evs) != 2 {
		t.Fatalf("Read(%s) = %+v, %v", done, evs, err)
	}
	_, err = l.Append(t.Context(), []eventlog.Event{{ExecutionID: running, Type: eventlog.TypeCommandIssued, CommandID: "c2"}})
	if !errors.Is(err, sqlite.ErrReadOnly) {
		t.Fatalf("Append to a read-only log: %v, want ErrReadOnly", err)
	}
	if _, err := l.SaveSnapshot(t.Context(), eventlog.Snapshot{ExecutionID: running, Format: "f", Seq: 1, Data: []byte("x")}); !errors.Is(err, sqlite.ErrReadOnly) {
		t.Fatalf("SaveSnapshot to a read-only log: %v, want ErrReadOnly", err)
	}
}

// TestReadOnlyOpenOnAFullDisk: a log no process holds open, on a disk
// that filled meanwhile, opens read-only (what status and events use)
// and reads: opening it for writing fails there (SQLite must create and
// size its -shm file), which kept a user from even looking at the
// execution that filled the disk.
func TestReadOnlyOpenOnAFullDisk(t *testing.T) {
	dir := testenv.SmallDisk(t, "1m")
	path := filepath.Join(dir, "events.db")
	done, running := readOnlyFixture(t, path)
	testenv.FillDisk(t, filepath.Join(dir, "filler"))
	l, err := sqlite.Open(t.Context(), path, sqlite.Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open on a full disk: %v", err)
	}
	defer l.Close()
	checkReadOnly(t, l, done, running)
}

// TestReadOnlyOpenOnAReadOnlyFileSystem: the same on a file system that
// went read-only, where SQLite cannot even create the -shm file.
func TestReadOnlyOpenOnAReadOnlyFileSystem(t *testing.T) {
	dir := testenv.SmallDisk(t, "1m")
	path := filepath.Join(dir, "events.db")
	done, running := readOnlyFixture(t, path)
	testenv.RemountReadOnly(t, dir)
	l, err := sqlite.Open(t.Context(), path, sqlite.Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open on a read-only file system: %v", err)
	}
	defer l.Close()
	checkReadOnly(t, l, done, running)
}

// TestReadOnlyOpenOfACrashedLogOnAFullDiskSaysSo: a log whose writer
// died with commits still in its WAL cannot be read without the -shm
// file a full disk has no room for (reading the main file alone would
// miss those commits): the read-only open fails, naming the file and the
// likely cause.
func TestReadOnlyOpenOfACrashedLogOnAFullDiskSaysSo(t *testing.T) {
	dir := testenv.SmallDisk(t, "1m")
	live := filepath.Join(t.TempDir(), "events.db")
	l := open(t, live, sqlite.Config{})
	if _, err := l.Append(t.Context(), []eventlog.Event{{ExecutionID: logtest.ExecutionID("crashed"), Type: eventlog.TypeExecutionStarted}}); err != nil {
		t.Fatal(err)
	}
	// What a crash leaves: the file and its WAL, the last commits in it.
	path := filepath.Join(dir, "events.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(live + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 && suffix == "-wal" {
			t.Fatal("the live log's WAL is empty")
		}
		if err := os.WriteFile(path+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testenv.FillDisk(t, filepath.Join(dir, "filler"))
	r, err := sqlite.Open(t.Context(), path, sqlite.Config{ReadOnly: true})
	if err == nil {
		_ = r.Close()
		t.Skip("SQLite opened the crashed log on a full disk: nothing to explain")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "disk full") {
		t.Fatalf("read-only Open of a crashed log on a full disk: %q: want the log's path %s and the cause", msg, path)
	}
}
