package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// cliBinary builds the cursorflow command once for the package's tests
// that run it as a user would (killed, resumed, followed) and returns its
// path.
func cliBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go toolchain not on PATH")
	}
	cliBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "cursorflow-cli-")
		if err != nil {
			cliBuild.err = err
			return
		}
		cliBuild.dir = dir
		cliBuild.path = filepath.Join(dir, "cursorflow")
		if out, err := exec.Command("go", "build", "-o", cliBuild.path, ".").CombinedOutput(); err != nil {
			cliBuild.err = &buildError{err: err, out: string(out)}
		}
	})
	if cliBuild.err != nil {
		t.Fatalf("build cursorflow: %v", cliBuild.err)
	}
	return cliBuild.path
}

var cliBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// removeCLIBuild deletes the cached build (TestMain calls it at the end).
func removeCLIBuild() {
	if cliBuild.dir != "" {
		_ = os.RemoveAll(cliBuild.dir)
	}
}
