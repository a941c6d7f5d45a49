package noop_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
)

func TestExecute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config map[string]any
		args   map[string]any
		want   any
	}{
		{"config minus kind", map[string]any{"kind": "noop", "total": int64(3)}, map[string]any{"x": 1}, map[string]any{"total": int64(3)}},
		{"args when config is empty", map[string]any{"kind": "noop"}, map[string]any{"x": 1}, map[string]any{"x": 1}},
		{"nothing", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := noop.New().Execute(context.Background(), &tools.Call{Config: tt.config, Args: tt.args})
			if err != nil || out.Status != tools.StatusSuccess {
				t.Fatalf("%v %+v", err, out)
			}
			if tt.want == nil {
				if out.Data != nil {
					t.Errorf("data %#v, want nil", out.Data)
				}
				return
			}
			if !reflect.DeepEqual(out.Data, tt.want) {
				t.Errorf("data %#v, want %#v", out.Data, tt.want)
			}
		})
	}
}
