package proc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChildDiesWithTheWorker: a worker killed with SIGKILL (no chance to
// cancel anything) takes the child it started with it, so a resumed
// execution's run of the same row does not race a body still running.
// The test runs itself as the worker.
func TestChildDiesWithTheWorker(t *testing.T) {
	if os.Getenv("PROC_TEST_WORKER") == "1" {
		cmd := Command(context.Background(), "sleep", "60")
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("child", cmd.Process.Pid)
		time.Sleep(time.Hour) // until killed
	}
	t.Parallel()
	worker := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithTheWorker$")
	worker.Env = append(os.Environ(), "PROC_TEST_WORKER=1")
	out, err := worker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "child ") {
		_ = worker.Process.Kill()
		t.Fatalf("worker said %q: %v", line, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "child ")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The child is gone once kill(pid, 0) fails; it may linger a
		// moment as a zombie of init, which reaps it.
		if err := syscall.Kill(pid, 0); err != nil || zombie(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child %d outlived its killed worker", pid)
		}
		time.Sleep(20 * time.Millisecond) // polling the process table with a deadline
	}
}

// zombie reports whether pid has exited and awaits reaping.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}
