package conv

import (
	"testing"
	"time"
)

func TestScalar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   any
		want string
	}{
		{1.0, "1"}, {2.5, "2.5"}, {-3.0, "-3"}, {1e21, "1e+21"}, {int64(7), "7"}, {true, "true"},
		{nil, ""}, {"s", "s"}, {[]any{1.0, "a"}, `[1,"a"]`}, {map[string]any{"k": false}, `{"k":false}`},
	}
	for _, tt := range tests {
		if got := Scalar(tt.in); got != tt.want {
			t.Errorf("Scalar(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      any
		want    time.Duration
		ok, bad bool
	}{
		{8, 8 * time.Second, true, false}, {0.5, 500 * time.Millisecond, true, false}, {"2", 2 * time.Second, true, false},
		{"1m", time.Minute, true, false}, {nil, 0, false, false}, {"soon", 0, false, true}, {-1.0, 0, false, true},
	}
	for _, tt := range tests {
		d, ok, err := Seconds(tt.in)
		if d != tt.want || ok != tt.ok || (err != nil) != tt.bad {
			t.Errorf("Seconds(%#v) = %v %v %v", tt.in, d, ok, err)
		}
	}
}

func TestAlias(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  map[string]any
		want string
		ok   bool
	}{
		{map[string]any{"auth": "pg"}, "pg", true},
		{map[string]any{"credential": "pg"}, "pg", true},
		{map[string]any{"auth": map[string]any{"type": "postgres", "credential": "pg"}}, "pg", true},
		{map[string]any{"auth": map[string]any{"db": map[string]any{"key": "pg"}}}, "pg", true},
		{map[string]any{"auth": ""}, "", false},
		{map[string]any{}, "", false},
	}
	for _, tt := range tests {
		got, ok := Alias(tt.cfg)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Alias(%v) = %q %v", tt.cfg, got, ok)
		}
	}
}
