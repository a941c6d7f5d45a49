package main

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLibraryLogsGoThroughSlog: go-redis logs a pool that fails to dial
// through its own package-level logger, on stderr, whatever --v says. The
// CLI routes it through its slog logger at debug level: a run whose Redis
// refuses connections shows the engine's warnings, not go-redis's lines.
func TestLibraryLogsGoThroughSlog(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t)
	// A port nothing listens on: every dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	pb, err := filepath.Abs("../playbooks/redisstream_drain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", pb, "--v", "--eventlog", "memory:", "--progress", "never",
		"--credential", "redis_queue=redis://"+addr+"/0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Read stderr until the engine says it retries the refused open; by
	// then go-redis's pool has logged its failed dials.
	var lines []string
	sc := bufio.NewScanner(stderr)
	retried := false
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "transient failure; trying again") {
			retried = true
			break
		}
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	_ = cmd.Wait()
	if !retried {
		t.Fatalf("the run never retried the refused open; stderr:\n%s", strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "redis: ") || strings.HasPrefix(l, "[mysql] ") {
			t.Errorf("a library logged on its own, bypassing slog and --v: %s", l)
		}
	}
}
