package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestInterruptedRemoteFollowEndsQuietly: `events --follow --server` is
// stopped with ^C, like tail -f; it exits 0 without an error, as
// `events --follow --eventlog` does, not 1 with "context canceled".
func TestInterruptedRemoteFollowEndsQuietly(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t)
	r := startRemote(t)
	srv := []string{"--server", r.URL(), "--token", remoteToken}
	gated := writeFile(t, "gated.yaml", gatedRemotePlaybook)
	runDone := make(chan int, 1)
	go func() {
		code, _, _ := cli(append([]string{"run", gated}, srv...)...)
		runDone <- code
	}()
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for id == "" {
		ids, _ := r.Log.Executions(context.Background(), eventlog.ExecutionsQuery{Unfinished: true})
		for _, x := range ids {
			if s, err := engine.Inspect(context.Background(), r.Log, x); err == nil && len(s.InFlight) > 0 {
				id = x
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("gated execution never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Cleanup(func() {
		_, _, _ = cli(append([]string{"cancel", id}, srv...)...)
		<-runDone
	})

	cmd := exec.Command(bin, append([]string{"events", id, "--follow"}, srv...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt only once the follow has printed the execution's start:
	// it is then streaming, waiting for events that do not come.
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && !strings.Contains(lines.Text(), "execution.started") {
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
	}
	if code := exitStatus(cmd.Wait()); code != exitOK || errOut.Len() > 0 {
		t.Fatalf("interrupted events --follow --server: exit %d, stderr %q; want 0 and nothing", code, errOut.String())
	}
}
