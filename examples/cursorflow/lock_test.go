package main

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cursorflow/cursorflow/eventlog/eventlogurl"
	"github.com/cursorflow/cursorflow/internal/testenv"
)

// stderrWatch collects a command's stderr and closes seen once it holds
// want.
type stderrWatch struct {
	want string
	seen chan struct{}

	mu  sync.Mutex
	buf strings.Builder
}

func (w *stderrWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		select {
		case <-w.seen:
		default:
			close(w.seen)
		}
	}
	return len(p), nil
}

func (w *stderrWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// pgLockLog is an event log URL for PostgreSQL at dsn, in a schema of the
// test's own.
func pgLockLog(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(eventlogurl.SchemaParam, "cli_lock_"+testenv.RandomSuffix(t))
	u.RawQuery = q.Encode()
	return u.String()
}

// gatedPlaybook writes dir/flow.yaml, whose one step waits until the test
// creates the file gate (dir/gate), and returns both paths.
func gatedPlaybook(t *testing.T, dir string) (pb, gate string) {
	t.Helper()
	gate = filepath.Join(dir, "gate")
	pb = filepath.Join(dir, "flow.yaml")
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: gated}
workflow:
  - step: start
    tool: {kind: shell, command: "while [ ! -e ` + gate + ` ]; do sleep 0.02; done; echo passed"}
`
	if err := os.WriteFile(pb, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return pb, gate
}

// TestOneDriverPerExecution: while `cursorflow run` drives an execution,
// a `cursorflow resume` of it is refused, as a user who resumes too early
// would otherwise have two processes writing conflicting decisions to one
// log. Once the run is killed (kill -9), resume takes the execution over
// and completes it: the lock goes with the process that held it.
func TestOneDriverPerExecution(t *testing.T) {
	bin := cliBinary(t)
	logs := map[string]func(t *testing.T, dir string) string{
		"sqlite":   func(t *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "events.db") },
		"postgres": func(t *testing.T, _ string) string { return pgLockLog(t, testenv.Postgres(t)) },
	}
	for name, logURL := range logs {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			eventlog := logURL(t, dir)
			pb, gate := gatedPlaybook(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run := exec.CommandContext(ctx, bin, "run", pb, "--eventlog", eventlog)
			id, _ := startRun(t, run)
			out, err := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", eventlog).CombinedOutput()
			if code := exitStatus(err); code != exitInvalid || !strings.Contains(string(out), "another process is driving this execution") {
				t.Fatalf("resume during the run: exit %d, %s", code, out)
			}
			if name == "sqlite" {
				// The same log reached through a symlink has the same lock.
				link := filepath.Join(t.TempDir(), "alias.db")
				if err := os.Symlink(filepath.Join(dir, "events.db"), link); err != nil {
					t.Fatal(err)
				}
				out, err := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", "sqlite:"+link).CombinedOutput()
				if code := exitStatus(err); code != exitInvalid || !strings.Contains(string(out), "another process is driving this execution") {
					t.Fatalf("resume through a symlink during the run: exit %d, %s", code, out)
				}
			}
			if err := run.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = run.Wait()

			resume := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", eventlog, "--json")
			type result struct {
				out []byte
				err error
			}
			done := make(chan result, 1)
			go func() {
				b, err := resume.CombinedOutput()
				done <- result{b, err}
			}()
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if code := exitStatus(r.err); code != exitOK || !strings.Contains(string(r.out), `"status":"completed"`) {
				t.Fatalf("resume after the kill: exit %d, %s", code, r.out)
			}
		})
	}
}

// exitStatus is the exit code of a finished command whose Run (or Output)
// returned err.
func exitStatus(err error) int {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestLockSessionLost: the PostgreSQL session holding a run's lock ends
// while the run goes on (terminated; or cut by the network, the server
// then unreachable for a few seconds, as across a restart). When no other
// process took the lock meanwhile, the run takes it again (once the
// server answers) and goes on, still alone: a resume is refused. When
// another process took it first, the run stops (exit 1, saying so)
// rather than drive the execution beside it.
func TestLockSessionLost(t *testing.T) {
	bin := cliBinary(t)
	dsn := testenv.Postgres(t)
	for _, tc := range []struct {
		name            string
		outage, another bool
	}{{"taken again", false, false}, {"taken again after an outage", true, false}, {"taken by another", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			eventlog := pgLockLog(t, dsn)
			var proxy *testenv.Proxy
			if tc.outage {
				// The run reaches the server through a proxy that the test
				// cuts.
				proxy, eventlog = testenv.NewURLProxy(t, eventlog)
			}
			pb, gate := gatedPlaybook(t, t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run := exec.CommandContext(ctx, bin, "run", pb, "--eventlog", eventlog)
			runErr := &stderrWatch{want: "the lock cannot be taken again yet", seen: make(chan struct{})}
			run.Stderr = runErr
			id, rest := startRun(t, run)

			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			// The lock's key is hashtextextended(name, 0): a bigint, held
			// as classid (high half) and objid (low half).
			holder := `(SELECT l.pid FROM pg_locks l, (SELECT hashtextextended('cursorflow execution ` + id + `', 0) AS h) k
				WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
				AND l.classid::bigint = (k.h >> 32) & 4294967295 AND l.objid::bigint = k.h & 4294967295)`
			var before int
			if err := conn.QueryRow(ctx, "SELECT "+holder).Scan(&before); err != nil {
				t.Fatalf("no session holds the run's lock: %v", err)
			}
			if !tc.another {
				if tc.outage {
					// Every session cut, and connections refused until the
					// run says it cannot take the lock again (other parts
					// of the run reconnect too: a count of refusals could go
					// to them).
					proxy.RefuseNext(1 << 30)
					proxy.DropConnections()
					select {
					case <-runErr.seen:
					case <-ctx.Done():
						t.Fatalf("the run never said the lock cannot be taken again:\n%s", runErr)
					}
					proxy.RefuseNext(0)
				} else if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend("+holder+")"); err != nil {
					t.Fatal(err)
				}
				// The run takes the lock again on a new session.
				for {
					var pid int
					err := conn.QueryRow(ctx, "SELECT coalesce("+holder+", 0)").Scan(&pid)
					if err != nil {
						t.Fatal(err)
					}
					if pid != 0 && pid != before {
						break
					}
					select {
					case <-ctx.Done():
						t.Fatal("the run never took its lock again")
					case <-time.After(20 * time.Millisecond):
					}
				}
				out, err := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", eventlog).CombinedOutput()
				if code := exitStatus(err); code != exitInvalid || !strings.Contains(string(out), "another process is driving this execution") {
					t.Fatalf("resume while the run holds its lock again: exit %d, %s", code, out)
				}
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(rest)
				if err := run.Wait(); err != nil || !strings.Contains(string(b), "completed") {
					t.Fatalf("the run: %v\n%s\n%s", err, b, runErr.String())
				}
				if n := strings.Count(runErr.String(), "the lock cannot be taken again yet"); tc.outage && n != 1 {
					t.Fatalf("the run said %d times that the server was unreachable, want once for the outage:\n%s", n, runErr.String())
				}
				return
			}
			// Another session waits for the lock as the holder is ended, so
			// it has the lock before the run looks again.
			if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend("+holder+"); SELECT pg_advisory_lock(hashtextextended('cursorflow execution "+id+"', 0))"); err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(rest)
			if code := exitStatus(run.Wait()); code != exitInvalid || !strings.Contains(runErr.String(), "lost the execution's lock to another process") {
				t.Fatalf("the run after its lock went to another session: exit %d\n%s", code, runErr.String())
			}
			if err := conn.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.CommandContext(ctx, bin, "resume", id, "--eventlog", eventlog, "--json").CombinedOutput()
			if code := exitStatus(err); code != exitOK || !strings.Contains(string(out), `"status":"completed"`) {
				t.Fatalf("resume once the other session let go: exit %d, %s", code, out)
			}
		})
	}
}
