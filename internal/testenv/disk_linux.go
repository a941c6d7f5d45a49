package testenv

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size (mount's size= option: "1m", "256k")
// on a fresh directory and returns it, for tests of a disk that fills;
// it is unmounted when the test ends. It skips the test without root,
// and skips (fails under CI=true) when the mount fails.
func SmallDisk(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("filling a disk needs a small tmpfs, which needs root: skipped")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		unavailable(t, "mount a %s tmpfs: %v: %s", size, err, out)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// RemountReadOnly remounts dir, a SmallDisk, read-only, as a file system
// that went read-only after an error (ext4's errors=remount-ro) is. It
// skips (fails under CI=true) when the remount fails.
func RemountReadOnly(t testing.TB, dir string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		unavailable(t, "remount %s read-only: %v: %s", dir, err, out)
	}
}

// FillDisk writes the file name until its disk is full and returns how
// many bytes it took (what removing it frees).
func FillDisk(t testing.TB, name string) int64 {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for chunk := make([]byte, 4<<10); ; {
		n, err := f.Write(chunk)
		size += int64(n)
		if err != nil {
			break // full: what the caller wants
		}
	}
	_ = f.Close()
	return size
}
