package builtin_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
	"github.com/cursorflow/cursorflow/tools/noop"
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
