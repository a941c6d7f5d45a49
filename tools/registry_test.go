package tools_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
)

func okTool() tools.Tool {
	return tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess}, nil
	})
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := tools.NewRegistry()
	tests := []struct {
		name string
		kind string
		tool tools.Tool
		is   error
	}{
		{"first", "http", okTool(), nil},
		{"second", "noop", okTool(), nil},
		{"duplicate", "http", okTool(), tools.ErrDuplicateKind},
		{"empty kind", "", okTool(), errors.New("any")},
		{"nil tool", "x", nil, errors.New("any")},
		{"typed nil tool", "y", (*pointerTool)(nil), errors.New("any")},
	}
	for _, tt := range tests {
		err := r.Register(tt.kind, tt.tool)
		if (err != nil) != (tt.is != nil) {
			t.Errorf("%s: err %v", tt.name, err)
		}
		if tt.is == tools.ErrDuplicateKind && (!errors.Is(err, tools.ErrDuplicateKind) || !strings.Contains(err.Error(), `"http"`)) {
			t.Errorf("%s: err %v should wrap ErrDuplicateKind and name the kind", tt.name, err)
		}
	}
	if got := r.Kinds(); !reflect.DeepEqual(got, []string{"http", "noop"}) {
		t.Errorf("kinds %v", got)
	}
	if _, err := r.Lookup("http"); err != nil {
		t.Errorf("lookup http: %v", err)
	}
	_, err := r.Lookup("duckdb")
	if !errors.Is(err, tools.ErrUnknownKind) || !strings.Contains(err.Error(), `"duckdb"`) {
		t.Errorf("lookup duckdb: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustRegister of a duplicate did not panic")
		}
	}()
	r.MustRegister("noop", okTool())
}

func TestRegistryConcurrent(t *testing.T) {
	t.Parallel()
	r := tools.NewRegistry()
	r.MustRegister("a", okTool())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				if _, err := r.Lookup("a"); err != nil {
					t.Error(err)
					return
				}
				if j == 100 {
					r.Register(string(rune('b'+i)), okTool())
				}
			}
		})
	}
	wg.Wait()
	if n := len(r.Kinds()); n != 9 {
		t.Errorf("kinds %d, want 9", n)
	}
}

type pointerTool struct{}

func (*pointerTool) Execute(context.Context, *tools.Call) (tools.Output, error) {
	return tools.Output{}, nil
}
