//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFile takes an exclusive flock on dir/NAME.lock (NAME: id made safe
// for a file name). The file is removed on release; a process that locked
// a file just removed sees that the path no longer names it and tries
// again.
func lockFile(dir, id string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock execution %s: %w", id, err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%x.lock", id))
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lock execution %s: %w", id, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			if err == syscall.EWOULDBLOCK {
				return nil, fmt.Errorf("execution %s: %w (lock %s)", id, errDriven, path)
			}
			return nil, fmt.Errorf("lock execution %s: %w", id, err)
		}
		held, errHeld := f.Stat()
		named, errNamed := os.Stat(path)
		if errHeld == nil && errNamed == nil && os.SameFile(held, named) {
			return func() {
				_ = os.Remove(path)
				_ = f.Close()
			}, nil
		}
		_ = f.Close() // removed by its last holder meanwhile: lock the new one
	}
}
