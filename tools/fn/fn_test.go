package fn_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

func TestExecute(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name    string
		f       fn.Func
		want    tools.Output
		wantErr error
	}{
		{"value becomes data", func(context.Context, *tools.Call) (any, error) { return map[string]any{"a": 1}, nil },
			tools.Output{Status: tools.StatusSuccess, Data: map[string]any{"a": 1}}, nil},
		{"error becomes error output", func(context.Context, *tools.Call) (any, error) { return nil, boom },
			tools.Output{Status: tools.StatusError, Error: "boom"}, nil},
		{"output passes through", func(context.Context, *tools.Call) (any, error) {
			return tools.Output{Status: tools.StatusError, Error: "custom", Data: 1}, nil
		}, tools.Output{Status: tools.StatusError, Error: "custom", Data: 1}, nil},
		{"abort is returned", func(context.Context, *tools.Call) (any, error) { return nil, fn.Abort(boom) },
			tools.Output{}, boom},
		{"panic is recovered", func(context.Context, *tools.Call) (any, error) { panic("bad") },
			tools.Output{}, errors.New("any")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := fn.New(tt.f).Execute(context.Background(), &tools.Call{Kind: "k"})
			if (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == boom && !errors.Is(err, boom) {
				t.Errorf("err %v does not wrap boom", err)
			}
			if !reflect.DeepEqual(out, tt.want) {
				t.Errorf("out %+v, want %+v", out, tt.want)
			}
		})
	}
}
