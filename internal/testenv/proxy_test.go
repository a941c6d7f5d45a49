package testenv

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer accepts connections and echoes every line back until the
// test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes a line on c and reads it back.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) error {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		t.Fatalf("echo of %q came back as %q", line, got)
	}
	return nil
}

func TestProxyForwardsAndDrops(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	if p.Open() != 0 {
		t.Fatalf("Open() = %d before any client, want 0", p.Open())
	}
	var clients []net.Conn
	var readers []*bufio.Reader
	for i := range 2 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		r := bufio.NewReader(c)
		if err := roundTrip(t, c, r, "hello"); err != nil {
			t.Fatalf("client %d through the proxy: %v", i, err)
		}
		clients, readers = append(clients, c), append(readers, r)
	}
	if got := p.Open(); got != 2 {
		t.Fatalf("Open() = %d with two clients, want 2", got)
	}

	if got := p.DropConnections(); got != 2 {
		t.Fatalf("DropConnections() = %d, want 2", got)
	}
	p.WaitClosed(t, 10*time.Second)
	for i, c := range clients {
		if err := roundTrip(t, c, readers[i], "again"); err == nil {
			t.Fatalf("client %d still talks to the server after the drop", i)
		}
	}

	// The proxy keeps accepting after a drop.
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(t, c, bufio.NewReader(c), "after"); err != nil {
		t.Fatalf("new client after the drop: %v", err)
	}
	if got := p.DropConnections(); got != 1 {
		t.Fatalf("second DropConnections() = %d, want 1", got)
	}
}

func TestProxyRefusesNext(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	p.RefuseNext(2)
	for i := range 3 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		err = roundTrip(t, c, bufio.NewReader(c), "hello")
		_ = c.Close()
		if refused := i < 2; refused != (err != nil) {
			t.Fatalf("connection %d: round trip error %v, want refused %v", i, err, refused)
		}
	}
	if got := p.Accepted(); got != 3 {
		t.Fatalf("Accepted() = %d, want 3", got)
	}
}
