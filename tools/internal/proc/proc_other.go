//go:build !unix

package proc

import "os/exec"

// killGroup is a no-op where process groups are not available: only the
// direct child is killed on cancellation.
func killGroup(*exec.Cmd) {}
