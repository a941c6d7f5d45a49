package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine/api"
)

// binSet is a set of binaries compiled once per test binary into a
// temporary directory.
type binSet struct {
	once sync.Once
	dir  string
	err  error
}

// The plain builds, and the builds with fault points (-tags faultpoint).
var plainBins, faultBins binSet

// build compiles pkgs (import paths) with tags into the set's directory,
// once, and returns the directory.
func (b *binSet) build(t testing.TB, tags string, pkgs ...string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "cursorflow-e2e-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.dir = dir
		args := []string{"build", "-o", dir + string(filepath.Separator)}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.Command("go", append(args, pkgs...)...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.dir
}

const (
	serverPkg = "github.com/cursorflow/cursorflow/examples/server"
	workerPkg = "github.com/cursorflow/cursorflow/examples/worker"
	cliPkg    = "github.com/cursorflow/cursorflow/examples/cursorflow"
)

// binaries returns the server and worker binaries.
func binaries(t testing.TB) (server, worker string) {
	t.Helper()
	dir := plainBins.build(t, "", serverPkg, workerPkg)
	return filepath.Join(dir, "server"), filepath.Join(dir, "worker")
}

// faultBinaries returns the server, worker and cursorflow CLI binaries
// built with fault points (internal/faultpoint).
func faultBinaries(t testing.TB) (server, worker, cli string) {
	t.Helper()
	dir := faultBins.build(t, "faultpoint", serverPkg, workerPkg, cliPkg)
	return filepath.Join(dir, "server"), filepath.Join(dir, "worker"), filepath.Join(dir, "cursorflow")
}

// proc is a started process whose output goes to a file that the test
// prints when it fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *os.File
	done chan struct{}
	// exited is when the process was seen gone; read it after done.
	exited time.Time
}

func start(t testing.TB, name, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, name, nil, bin, args...)
}

// startEnv starts bin with env added to the test's environment.
func startEnv(t testing.TB, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); p.exited = time.Now(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(5 * time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			if len(b) > 6000 {
				b = append([]byte("...\n"), b[len(b)-6000:]...)
			}
			t.Logf("---- %s output ----\n%s", name, b)
		}
		_ = out.Close()
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// killedBySIGKILL reports whether the process has ended by SIGKILL.
func (p *proc) killedBySIGKILL() bool {
	select {
	case <-p.done:
	default:
		return false
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// replica is a server process and its HTTP address.
type replica struct {
	*proc
	addr  string
	token string
}

func (r *replica) ready(ctx context.Context) bool { return r.probe(ctx, "/readyz") }

// waitHealthy polls /healthz until the replica serves HTTP.
func (r *replica) waitHealthy(ctx context.Context, t testing.TB) {
	t.Helper()
	for !r.probe(ctx, "/healthz") {
		if !r.alive() {
			t.Fatalf("%s exited", r.name)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never served /healthz", r.name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitWorkers polls GET /v1/workers until it lists n workers and returns
// that list.
func (r *replica) waitWorkers(ctx context.Context, t testing.TB, n int) api.WorkerList {
	t.Helper()
	for {
		var list api.WorkerList
		if _, err := r.do(ctx, http.MethodGet, "/v1/workers", nil, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Workers) == n {
			return list
		}
		select {
		case <-ctx.Done():
			t.Fatalf("workers listed: %+v, want %d", list.Workers, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *replica) probe(ctx context.Context, path string) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

func (r *replica) do(ctx context.Context, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+r.addr+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", strings.TrimSpace(string(b)), err)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return resp.StatusCode, nil
}

// leaderOf polls the replicas until exactly one of the live ones is ready.
func leaderOf(ctx context.Context, t testing.TB, rs []*replica) *replica {
	t.Helper()
	for {
		var ready []*replica
		for _, r := range rs {
			if r.alive() && r.ready(ctx) {
				ready = append(ready, r)
			}
		}
		if len(ready) == 1 {
			return ready[0]
		}
		if len(ready) > 1 {
			t.Fatalf("%d replicas claim to lead", len(ready))
		}
		select {
		case <-ctx.Done():
			t.Fatal("no replica became the leader")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
