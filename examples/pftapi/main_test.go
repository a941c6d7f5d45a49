package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/internal/testenv"
)

func TestServeAndShutdown(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	done := make(chan error, 1)
	go func() { done <- run([]string{"-addr", addr, "-rate-limit", "2"}) }()

	// Poll until the server answers (the signal handler is installed before
	// the listener opens).
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not come up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	codes := []int{}
	for range 3 {
		resp, err := http.Get("http://" + addr + "/api/v1/patient/demographics?patientId=1001")
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == 200 && body["firstName"] != "First884" {
			t.Fatalf("demographics %v", body)
		}
	}
	// The third request may or may not share the first two's window on a
	// very slow machine, but the first two are always admitted.
	if codes[0] != 200 || codes[1] != 200 || (codes[2] != 200 && codes[2] != 429) {
		t.Fatalf("status codes %v", codes)
	}

	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no graceful shutdown after SIGTERM")
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-rate-limit", "0"},
		{"-fail-rate", "1.5"},
		{"-latency", "-1s"},
		{"-addr", "256.0.0.1:bad"},
		{"-nope"},
	} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
	t.Setenv("PFT_RATE_LIMIT", "many")
	if err := run(nil); err == nil {
		t.Error("PFT_RATE_LIMIT=many accepted")
	}
}
