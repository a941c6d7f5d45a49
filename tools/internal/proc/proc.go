// Package proc runs the child processes of the tools that start one per
// call (python, shell): a credential-free environment, the task's
// timeout, output kept up to a cap, and cancellation that kills the whole
// process group.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/internal/conv"
)

// WaitDelay is how long Wait waits for the child's output pipes to close
// after the child was killed or exited (a grandchild may hold them).
const WaitDelay = 2 * time.Second

// Environ returns the worker's environment minus every
// tools.EnvCredentialPrefix variable: a child sees a credential only when
// the task passes it on purpose.
func Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, tools.EnvCredentialPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

// TimeoutKeys are the config keys WithTimeout reads, in the order it tries
// them. Tools that call WithTimeout list them among their keys
// (tools.ConfigKeyLister).
var TimeoutKeys = []string{"timeout", "timeout_seconds"}

// WithTimeout bounds ctx by the task's timeout (config key timeout or
// timeout_seconds, in seconds) when it sets a positive one. The returned
// cancel function is never nil. The error is the timeout's decoding error.
func WithTimeout(ctx context.Context, config map[string]any) (context.Context, context.CancelFunc, error) {
	if v, _, ok := conv.First(config, TimeoutKeys...); ok {
		d, ok, err := conv.Seconds(v)
		if err != nil {
			return ctx, func() {}, err
		}
		if ok && d > 0 {
			ctx, cancel := context.WithTimeout(ctx, d)
			return ctx, cancel, nil
		}
	}
	return ctx, func() {}, nil
}

// Ended describes why ctx ended, for an error message: how long the call
// had when its deadline passed ("timed out after 1s: context deadline
// exceeded"), or ctx's error as it is. start is when the call began.
func Ended(ctx context.Context, start time.Time) string {
	err := ctx.Err()
	if err == nil {
		return ""
	}
	if deadline, ok := ctx.Deadline(); ok && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("timed out after %s: %v", deadline.Sub(start).Round(time.Millisecond), err)
	}
	return err.Error()
}

// Command is exec.CommandContext with WaitDelay set and, where process
// groups exist, the child in its own group, which cancellation kills
// whole, so that subprocesses the child started leave no orphan holding
// the pipes.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = WaitDelay
	killGroup(cmd)
	return cmd
}

// Wait is cmd.Wait for a cmd made by Command. When the child exited but a
// process it started still held its output pipes WaitDelay later, exec
// gives the pipes up and returns exec.ErrWaitDelay without killing
// anything (it kills only on cancellation): Wait then kills the child's
// process group, so that nothing the failed call started outlives it, and
// says what happened in place of exec's bare error.
func Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		if cmd.Cancel != nil {
			_ = cmd.Cancel()
		}
		return fmt.Errorf("the command exited, but a process it started still held its output %s later (killed): %w", WaitDelay, err)
	}
	return err
}

// Capped is an io.Writer that keeps the first Max bytes written to it and
// drops the rest, so a chatty child cannot exhaust the worker's memory.
// Its buffer is not embedded: a Buffer's ReadFrom and WriteString, which
// io.Copy and io.WriteString prefer, would keep everything.
type Capped struct {
	buf bytes.Buffer
	// Max is how many bytes are kept.
	Max int
	// Dropped counts the bytes written past Max.
	Dropped int64
}

// Write keeps what fits under Max and reports the whole of p written.
func (c *Capped) Write(p []byte) (int, error) {
	if room := c.Max - c.buf.Len(); room < len(p) {
		if room > 0 {
			c.buf.Write(p[:room])
		}
		c.Dropped += int64(len(p) - max(room, 0))
		return len(p), nil
	}
	return c.buf.Write(p)
}

// Len is the number of bytes kept.
func (c *Capped) Len() int { return c.buf.Len() }

// Bytes returns the bytes kept.
func (c *Capped) Bytes() []byte { return c.buf.Bytes() }

// String returns the bytes kept as a string.
func (c *Capped) String() string { return c.buf.String() }

// maxLine bounds the bytes a Lines writer holds for one line: a longer
// line is handed on in pieces of this size.
const maxLine = 64 << 10

// Lines is an io.Writer that passes everything on to W and calls Line with
// each complete line (without its newline) as it is written, so a tool can
// report a child's output while the child runs. Flush hands on a last line
// that has no newline. Line runs on the writing goroutine: it must not
// block.
type Lines struct {
	W    io.Writer
	Line func(line string)
	buf  []byte
}

// Write implements io.Writer.
func (l *Lines) Write(p []byte) (int, error) {
	n, err := l.W.Write(p)
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			l.buf = append(l.buf, rest...)
			rest = nil
		} else {
			l.buf = append(l.buf, rest[:i]...)
			rest = rest[i+1:]
		}
		for len(l.buf) > maxLine {
			l.Line(string(l.buf[:maxLine]))
			l.buf = append(l.buf[:0], l.buf[maxLine:]...)
		}
		if i >= 0 {
			l.Line(strings.TrimSuffix(string(l.buf), "\r"))
			l.buf = l.buf[:0]
		}
	}
	return n, err
}

// Flush hands on the last line if it had no newline.
func (l *Lines) Flush() {
	if len(l.buf) > 0 {
		l.Line(string(l.buf))
		l.buf = l.buf[:0]
	}
}
