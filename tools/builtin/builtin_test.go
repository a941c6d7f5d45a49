package builtin_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
	"github.com/cursorflow/cursorflow/tools/internal/keyscan"
	"github.com/cursorflow/cursorflow/tools/noop"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

func TestNewRegistry(t *testing.T) {
	t.Parallel()
	reg, closer := builtin.NewRegistry(builtin.Options{})
	defer closer.Close()
	if got := reg.Kinds(); !reflect.DeepEqual(got, builtin.Kinds) {
		t.Fatalf("kinds %v, want %v", got, builtin.Kinds)
	}
	tool, err := reg.Lookup("noop")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tool.Execute(context.Background(), &tools.Call{Config: map[string]any{"x": "y"}})
	if err != nil || out.Status != tools.StatusSuccess {
		t.Fatalf("noop: %v %+v", err, out)
	}
	if err := closer.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestRegisterConflict(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	reg.MustRegister("python", noop.New())
	if _, err := builtin.Register(reg, builtin.Options{}); !errors.Is(err, tools.ErrDuplicateKind) {
		t.Fatalf("err %v, want ErrDuplicateKind", err)
	}
	if got := reg.Kinds(); !reflect.DeepEqual(got, []string{"python"}) {
		t.Errorf("a failed Register left kinds %v", got)
	}
}

func TestKeychainFallback(t *testing.T) {
	t.Parallel()
	// The postgres tool falls back to Options.Keychain when a call has none;
	// an unknown alias then fails as not found rather than "no keychain".
	reg, closer := builtin.NewRegistry(builtin.Options{Keychain: tools.StaticKeychain{}})
	defer closer.Close()
	pg, _ := reg.Lookup("postgres")
	_, err := pg.Execute(context.Background(), &tools.Call{Config: map[string]any{"auth": "nope", "command": "SELECT 1"}})
	if !errors.Is(err, tools.ErrCredentialNotFound) || strings.Contains(err.Error(), "no keychain") {
		t.Fatalf("err %v", err)
	}
}

func TestCodeToolsAreOptIn(t *testing.T) {
	t.Parallel()
	call := map[string]*tools.Call{
		"shell":  {Config: map[string]any{"command": "echo ran"}},
		"python": {Config: map[string]any{"code": "return 'ran'"}},
	}
	reg, closer := builtin.NewRegistry(builtin.Options{})
	defer closer.Close()
	for kind, c := range call {
		tool, err := reg.Lookup(kind)
		if err != nil {
			t.Fatal(err)
		}
		out, err := tool.Execute(context.Background(), c)
		if !errors.Is(err, builtin.ErrDisabled) || !strings.Contains(err.Error(), "--allow-code") {
			t.Errorf("%s by default: %v %+v, want ErrDisabled saying how to enable it", kind, err, out)
		}
	}
	on, closer2 := builtin.NewRegistry(builtin.Options{EnableShell: true, EnablePython: true})
	defer closer2.Close()
	sh, _ := on.Lookup("shell")
	if out, err := sh.Execute(context.Background(), call["shell"]); err != nil || out.Status != tools.StatusSuccess {
		t.Errorf("enabled shell: %v %+v", err, out)
	}
}

// TestConfigKeys: every built-in kind but noop, and the playbook tool,
// lists exactly the configuration keys its package's code reads
// (keyscan), so engine.Lint warns about no key that works and hides no
// typo; a kind left disabled lists the keys of the tool it stands for,
// so that lint checks its tasks all the same.
func TestConfigKeys(t *testing.T) {
	t.Parallel()
	off, c1 := builtin.NewRegistry(builtin.Options{})
	defer c1.Close()
	on, c2 := builtin.NewRegistry(builtin.Options{EnablePython: true, EnableShell: true, EnableDuckDB: true})
	defer c2.Close()
	for _, kind := range append(slices.Clone(builtin.Kinds), "playbook") {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			a, b := playbook.New(nil), playbook.New(nil)
			if kind != "playbook" {
				a, _ = off.Lookup(kind)
				b, _ = on.Lookup(kind)
			}
			ka, okA := tools.ConfigKeys(a)
			kb, okB := tools.ConfigKeys(b)
			if kind == "noop" {
				if okA || okB {
					t.Errorf("noop lists keys %q: it echoes any", ka)
				}
				return
			}
			if !okA || !okB || !slices.Equal(ka, kb) {
				t.Fatalf("disabled lists %q (%v), enabled %q (%v)", ka, okA, kb, okB)
			}
			keyscan.Check(t, "../"+kind, kb)
		})
	}
}
