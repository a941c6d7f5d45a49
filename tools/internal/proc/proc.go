// Package proc runs the child processes of the tools that start one per
// call (python, shell): a credential-free environment, the task's
// timeout, output kept up to a cap, and cancellation that kills the whole
// process group, and (see Start) the processes that left it.
package proc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
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
// the pipes. Start it with Start.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = WaitDelay
	killGroup(cmd)
	return cmd
}

// orphansSwept makes SweepOrphansOnce sweep once per process: a worker's
// predecessor's orphans are there when it starts.
var orphansSwept sync.Once

// SweepOrphansOnce runs SweepOrphans the first time a tool of this
// process is made, and logs on log what it killed.
func SweepOrphansOnce(log *slog.Logger) {
	orphansSwept.Do(func() {
		if n := SweepOrphans(); n > 0 {
			log.Warn("killed processes that shell or python steps of a process that died had started; they were running on, orphaned", "processes", n)
		}
	})
}

// MarkerPrefix starts the name of the variable Start adds to a child's
// environment: MarkerPrefix + a random hex id + "=" + the starting
// process's owner id (see SweepOrphans).
const MarkerPrefix = "CURSORFLOW_PROC_"

// Start is cmd.Start for a cmd made by Command. It adds a variable of
// the call's own (MarkerPrefix) to the child's environment, which the
// processes it starts inherit, and makes cancellation (and Wait, when it
// kills) also kill every process that holds it: one that left the
// child's process group (setsid, a daemonising script, Python's
// start_new_session=True) is found that way where the system has /proc,
// rather than left running, orphaned, after its call ended. sw is the
// calling tool's Sweeper.
func Start(cmd *exec.Cmd, sw *Sweeper) error {
	var id [12]byte
	_, _ = rand.Read(id[:])
	marker := MarkerPrefix + hex.EncodeToString(id[:]) + "=" + ownerID()
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	// A full slice expression: the tools share their base environment
	// between concurrent calls, and append must not write into it.
	cmd.Env = append(env[:len(env):len(env)], marker)
	if kill := cmd.Cancel; kill != nil {
		cmd.Cancel = func() error {
			err := kill()
			sw.sweep(marker)
			return err
		}
	}
	err := cmd.Start()
	if err != nil && cmd.Dir != "" {
		// exec reports a working directory it cannot enter as the
		// program's own error ("fork/exec /bin/sh: no such file or
		// directory"), which reads as a missing program.
		if fi, serr := os.Stat(cmd.Dir); serr != nil {
			return fmt.Errorf("working directory %s: %w", cmd.Dir, serr)
		} else if !fi.IsDir() {
			return fmt.Errorf("working directory %s: not a directory: %w", cmd.Dir, err)
		}
	}
	return err
}

// Wait is cmd.Wait for a cmd made by Command and started by Start. When
// the child exited but a process it started still held its output pipes
// WaitDelay later, exec gives the pipes up and returns exec.ErrWaitDelay
// without killing anything (it kills only on cancellation): Wait then
// kills the child's process group (and, through Start's cancellation,
// the processes that left it), so that nothing the failed call started
// outlives it, and says what happened in place of exec's bare error.
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
	// Revealed are the secrets revealed to the call. A line handed on in
	// pieces is never cut through one, so that the engine's concealing of
	// each piece (tools.ConcealSecrets) recognises it; the lines of a
	// secret of several lines, which that concealing cannot recognise one
	// at a time, are replaced by the secret's reference here.
	Revealed []tools.Revealed
	buf      []byte
	ready    bool
	secrets  []string
	multi    []multiline
}

// multiline is a secret of several lines, as a Lines writer sees it go
// by: its first line ends an output line, its last begins one, and those
// between are whole output lines.
type multiline struct {
	ref, first, last string
	middle           map[string]bool
}

func (l *Lines) prepare() {
	if l.ready {
		return
	}
	l.ready = true
	l.secrets = Secrets(l.Revealed)
	for _, r := range l.Revealed {
		parts := strings.Split(r.Secret, "\n")
		if len(parts) < 2 {
			continue
		}
		for i := range parts {
			parts[i] = strings.TrimSuffix(parts[i], "\r")
		}
		m := multiline{ref: r.Ref, first: parts[0], last: parts[len(parts)-1], middle: map[string]bool{}}
		for _, p := range parts[1 : len(parts)-1] {
			if p != "" { // an empty line reveals nothing
				m.middle[p] = true
			}
		}
		l.multi = append(l.multi, m)
	}
}

// emit hands line on with the lines of the secrets of several lines
// replaced by their reference.
func (l *Lines) emit(line string) {
	for _, m := range l.multi {
		if m.middle[line] {
			line = m.ref
			continue
		}
		if m.first != "" && strings.HasSuffix(line, m.first) {
			line = line[:len(line)-len(m.first)] + m.ref
		}
		if m.last != "" && strings.HasPrefix(line, m.last) {
			line = m.ref + line[len(m.last):]
		}
	}
	l.Line(line)
}

// Write implements io.Writer.
func (l *Lines) Write(p []byte) (int, error) {
	l.prepare()
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
			cut := maxLine - secretStart(l.buf[:maxLine], l.secrets)
			if cut == 0 {
				// A secret longer than a piece: cut it anyway.
				cut = maxLine
			}
			l.emit(string(l.buf[:cut]))
			l.buf = append(l.buf[:0], l.buf[cut:]...)
		}
		if i >= 0 {
			l.emit(strings.TrimSuffix(string(l.buf), "\r"))
			l.buf = l.buf[:0]
		}
	}
	return n, err
}

// Flush hands on the last line if it had no newline.
func (l *Lines) Flush() {
	if len(l.buf) > 0 {
		l.prepare()
		l.emit(string(l.buf))
		l.buf = l.buf[:0]
	}
}
