package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/sqlite"
)

// closeRecorder is a Driver whose only behaviour is counting Close calls
// and failing them on request; the registry never opens cursors.
type closeRecorder struct {
	closes atomic.Int32
	err    error
}

func (d *closeRecorder) Open(context.Context, cursor.Spec) (cursor.Cursor, error) {
	return nil, cursor.ErrUnsupported
}
func (d *closeRecorder) Features() cursor.Features { return cursor.Features{} }
func (d *closeRecorder) Close() error {
	d.closes.Add(1)
	return d.err
}

func TestRegister(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		kind    string
		driver  cursor.Driver
		wantErr error
		wantMsg string
	}{
		{name: "new kind", kind: "sqlite", driver: sqlite.New(sqlite.Config{})},
		{name: "duplicate", kind: "postgres", driver: &closeRecorder{}, wantErr: cursor.ErrDuplicateKind, wantMsg: `"postgres"`},
		{name: "empty kind", kind: "", driver: &closeRecorder{}, wantMsg: "empty kind"},
		{name: "nil driver", kind: "redis", driver: nil, wantMsg: "nil driver"},
		{name: "typed nil driver", kind: "sqlite", driver: (*sqlite.Driver)(nil), wantMsg: "nil driver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := cursor.NewRegistry()
			t.Cleanup(func() { _ = reg.Close() })
			if err := reg.Register("postgres", &closeRecorder{}); err != nil {
				t.Fatal(err)
			}
			err := reg.Register(tt.kind, tt.driver)
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("Register: %v", err)
				}
				d, err := reg.Lookup(tt.kind)
				if err != nil || d != tt.driver {
					t.Fatalf("Lookup(%q) = %v, %v; want the registered driver", tt.kind, d, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Register: err = %v, want it to mention %q", err, tt.wantMsg)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Register: err = %v, want errors.Is %v", err, tt.wantErr)
			}
		})
	}
}

func TestLookupUnknown(t *testing.T) {
	t.Parallel()
	reg := cursor.NewRegistry()
	if err := reg.Register("sqlite", &closeRecorder{}); err != nil {
		t.Fatal(err)
	}
	d, err := reg.Lookup("mongodb")
	if d != nil || !errors.Is(err, cursor.ErrUnknownKind) {
		t.Fatalf("Lookup = %v, %v; want ErrUnknownKind", d, err)
	}
	if !strings.Contains(err.Error(), `"mongodb"`) || !strings.Contains(err.Error(), "sqlite") {
		t.Fatalf("error %q should name the kind and the registered kinds", err)
	}
}

func TestKindsSorted(t *testing.T) {
	t.Parallel()
	reg := cursor.NewRegistry()
	if got := reg.Kinds(); len(got) != 0 {
		t.Fatalf("empty registry has kinds %v", got)
	}
	for _, k := range []string{"s3", "postgres", "nats", "clickhouse"} {
		if err := reg.Register(k, &closeRecorder{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(reg.Kinds()); got != "[clickhouse nats postgres s3]" {
		t.Fatalf("Kinds = %s", got)
	}
}

func TestCloseClosesEveryDriver(t *testing.T) {
	t.Parallel()
	reg := cursor.NewRegistry()
	ok, failing := &closeRecorder{}, &closeRecorder{err: errors.New("boom")}
	real := sqlite.New(sqlite.Config{})
	for kind, d := range map[string]cursor.Driver{"a": ok, "b": failing, "sqlite": real} {
		if err := reg.Register(kind, d); err != nil {
			t.Fatal(err)
		}
	}
	err := reg.Close()
	if err == nil || !strings.Contains(err.Error(), `close "b": boom`) {
		t.Fatalf("Close: %v, want the failing driver's error", err)
	}
	if ok.closes.Load() != 1 || failing.closes.Load() != 1 {
		t.Fatalf("closes: %d and %d, want 1 each", ok.closes.Load(), failing.closes.Load())
	}
	if _, err := real.Open(t.Context(), cursor.Spec{Kind: "sqlite", Credential: t.TempDir() + "/x.db"}); !errors.Is(err, cursor.ErrClosed) {
		t.Fatalf("sqlite Open after registry Close: %v, want ErrClosed", err)
	}
	if err := reg.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if ok.closes.Load() != 1 {
		t.Fatal("second Close closed the driver again")
	}
	if _, err := reg.Lookup("a"); !errors.Is(err, cursor.ErrClosed) {
		t.Fatalf("Lookup after Close: %v, want ErrClosed", err)
	}
	if err := reg.Register("c", &closeRecorder{}); !errors.Is(err, cursor.ErrClosed) {
		t.Fatalf("Register after Close: %v, want ErrClosed", err)
	}
}

func TestRegistryConcurrent(t *testing.T) {
	t.Parallel()
	reg := cursor.NewRegistry()
	const n = 32
	var wg sync.WaitGroup
	var dups atomic.Int32
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Every kind is registered twice; exactly one of each wins.
			if err := reg.Register(fmt.Sprintf("kind%d", i%(n/2)), &closeRecorder{}); errors.Is(err, cursor.ErrDuplicateKind) {
				dups.Add(1)
			} else if err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			_, _ = reg.Lookup(fmt.Sprintf("kind%d", i))
			_ = reg.Kinds()
		}()
	}
	wg.Wait()
	if got := len(reg.Kinds()); got != n/2 || dups.Load() != n/2 {
		t.Fatalf("%d kinds and %d duplicates, want %d of each", got, dups.Load(), n/2)
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestClaimError(t *testing.T) {
	t.Parallel()
	inner := errors.New("connection refused")
	tests := []struct {
		err  *cursor.ClaimError
		want string
	}{
		{&cursor.ClaimError{Kind: "postgres", Auth: "pg_k8s", Op: "claim", Err: inner}, "cursor postgres (auth pg_k8s): claim: connection refused"},
		{&cursor.ClaimError{Kind: "sqlite", Op: "ack", Err: inner}, "cursor sqlite: ack: connection refused"},
		{&cursor.ClaimError{Kind: "redis", Auth: "r", Err: inner}, "cursor redis (auth r): claim: connection refused"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		err := fmt.Errorf("frame 3: %w", tt.err)
		var ce *cursor.ClaimError
		if !errors.Is(err, inner) || !errors.As(err, &ce) || ce != tt.err {
			t.Errorf("%v does not unwrap to its ClaimError and cause", err)
		}
	}
}
