package resultstore_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cursorflow/cursorflow/resultstore/resultstoreurl"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

// TestFileStoreOnAnotherFileSystemThanTMPDIR: a file:// store whose
// directory is on another file system than $TMPDIR (a home directory on
// disk, /tmp a tmpfs, as on many distributions) stores results. gocloud's
// fileblob writes each object to a temporary file in os.TempDir and
// renames it into place, which fails across file systems ("invalid
// cross-device link"): every result over the threshold failed its step.
// It also put a result's bytes on the wrong disk, so a full /tmp failed
// a store with room to spare.
func TestFileStoreOnAnotherFileSystemThanTMPDIR(t *testing.T) {
	storeDir := t.TempDir()
	tmp, err := os.MkdirTemp("/dev/shm", "resultstore-tmpdir-")
	if err != nil {
		t.Skipf("no /dev/shm to hold TMPDIR on another file system: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	if device(t, storeDir) == device(t, tmp) {
		t.Skipf("%s and %s are on the same file system", storeDir, tmp)
	}
	t.Setenv("TMPDIR", tmp)

	ctx := context.Background()
	s, err := resultstoreurl.Open(ctx, "file://"+filepath.Join(storeDir, "results"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := []byte(`{"rows":[1,2,3]}`)
	ref, err := s.Put(ctx, "exec/step_1_1", data)
	if err != nil {
		t.Fatalf("Put with TMPDIR on another file system: %v", err)
	}
	got, err := s.Get(ctx, ref)
	if err != nil || string(got) != string(data) {
		t.Fatalf("Get = %q, %v; want %q", got, err, data)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Fatalf("the store left %d files in TMPDIR", len(left))
	}
}

func device(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Dev) //nolint:unconvert // Dev is uint64 here, narrower or signed on other platforms
}

// TestFileStoreOnAFullDiskLeavesNoPartialObject: a Put that fills the
// store's disk fails naming the object and the cause, and leaves nothing
// under the object's name (gocloud's writer, closed after its write
// failed, renamed the truncated temporary file into place: a partial
// object holding the space the operator frees); once space is freed the
// same Put stores the result.
func TestFileStoreOnAFullDiskLeavesNoPartialObject(t *testing.T) {
	dir := testenv.SmallDisk(t, "256k")

	ctx := context.Background()
	s, err := resultstoreurl.Open(ctx, "file://"+dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := []byte(`"` + strings.Repeat("r", 400<<10) + `"`)
	_, err = s.Put(ctx, "exec/step_1_1", data)
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Put on a full disk: %v, want the cause", err)
	}
	var left []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Fatalf("a failed Put left %v", left)
	}

	if out, err := exec.Command("mount", "-o", "remount,size=1m", dir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	ref, err := s.Put(ctx, "exec/step_1_1", data)
	if err != nil {
		t.Fatalf("Put once space is freed: %v", err)
	}
	if got, err := s.Get(ctx, ref); err != nil || len(got) != len(data) {
		t.Fatalf("Get: %d bytes, %v", len(got), err)
	}
}
