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
)

// build compiles the server and worker binaries into a temporary
// directory, once per test binary.
var build struct {
	once sync.Once
	dir  string
	err  error
}

func binaries(t testing.TB) (server, worker string) {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "cursorflow-e2e-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
			"github.com/cursorflow/cursorflow/examples/server", "github.com/cursorflow/cursorflow/examples/worker")
		out, err := cmd.CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return filepath.Join(build.dir, "server"), filepath.Join(build.dir, "worker")
}

// proc is a started process whose output goes to a file that the test
// prints when it fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *os.File
	done chan struct{}
}

func start(t testing.TB, name, bin string, args ...string) *proc {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
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
