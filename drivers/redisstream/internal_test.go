package redisstream

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    map[string]any
		want    Options
		wantErr string
	}{
		{name: "defaults", opts: map[string]any{"stream": "jobs"},
			want: Options{Stream: "jobs", Consumer: "slot", DeadLetterStream: "jobs:dead", Start: "0"}},
		{name: "everything", opts: map[string]any{"stream": " jobs ", "group": "g", "consumer": "w", "dead_letter_stream": "dlq",
			"start": "$", "delete_acked": true, "url": "redis://x"},
			want: Options{Stream: "jobs", Group: "g", Consumer: "w", DeadLetterStream: "dlq", Start: "$", DeleteAcked: true}},
		{name: "bool as string", opts: map[string]any{"stream": "s", "delete_acked": "true"},
			want: Options{Stream: "s", Consumer: "slot", DeadLetterStream: "s:dead", Start: "0", DeleteAcked: true}},
		{name: "numeric stream name", opts: map[string]any{"stream": int64(7)},
			want: Options{Stream: "7", Consumer: "slot", DeadLetterStream: "7:dead", Start: "0"}},
		{name: "unknown keys ignored", opts: map[string]any{"stream": "s", "table": "x"},
			want: Options{Stream: "s", Consumer: "slot", DeadLetterStream: "s:dead", Start: "0"}},
		{name: "no stream", opts: map[string]any{"group": "g"}, wantErr: `option "stream" is required`},
		{name: "stream not a string", opts: map[string]any{"stream": []any{"a"}}, wantErr: `option "stream" is []interface {}`},
		{name: "bad bool", opts: map[string]any{"stream": "s", "delete_acked": "maybe"}, wantErr: `option "delete_acked"`},
		{name: "dead letter is the stream", opts: map[string]any{"stream": "s", "dead_letter_stream": "s"}, wantErr: "must differ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOptions(tt.opts, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestToken(t *testing.T) {
	tests := []struct {
		tok     string
		id      string
		n       int
		wantErr bool
	}{
		{Token("1700000000000-0", 3), "1700000000000-0", 3, false},
		{"5-1#12", "5-1", 12, false},
		{"5-1", "", 0, true},
		{"#2", "", 0, true},
		{"5-1#0", "", 0, true},
		{"5-1#x", "", 0, true},
	}
	for _, tt := range tests {
		id, n, err := parseToken(tt.tok)
		if (err != nil) != tt.wantErr || id != tt.id || n != tt.n {
			t.Errorf("parseToken(%q) = %q, %d, %v; want %q, %d, error %v", tt.tok, id, n, err, tt.id, tt.n, tt.wantErr)
		}
	}
}

func TestParseClaim(t *testing.T) {
	ok := []any{
		[]any{[]any{"0-5", int64(4), []any{"n", "50"}}},
		[]any{
			[]any{"1-0", int64(1), []any{"a", "x", "b", "y"}},
			[]any{"2-0", int64(3), []any{}},
		},
	}
	dead, rows, err := parseClaim(ok)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || len(rows) != 2 {
		t.Fatalf("dead %d rows %d", len(dead), len(rows))
	}
	if d := dead[0]; d.Key != "0-5" || !reflect.DeepEqual(d.Values, map[string]any{"n": "50"}) ||
		d.Lease.Attempt != 4 || d.Lease.Token != "0-5#4" {
		t.Fatalf("dead row = %+v, want key 0-5, its fields, attempt 4 and token 0-5#4 (the claim holds it)", d)
	}
	if rows[0].Key != "1-0" || !reflect.DeepEqual(rows[0].Values, map[string]any{"a": "x", "b": "y"}) ||
		rows[0].Lease.Attempt != 1 || rows[0].Lease.Token != "1-0#1" {
		t.Fatalf("row 0 = %+v", rows[0])
	}
	if rows[1].Lease.Attempt != 3 || rows[1].Values == nil {
		t.Fatalf("row 1 = %+v", rows[1])
	}
	// Names and values that are not valid UTF-8 are base64, in claimed
	// and dead entries alike; valid UTF-8 is kept as it is.
	bin := []any{
		[]any{[]any{"0-6", int64(4), []any{"\xffk", "v\x80"}}},
		[]any{[]any{"3-0", int64(1), []any{"bin", "bin\xff\xfeok\x80", "café", "☃"}}},
	}
	if dead, rows, err = parseClaim(bin); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"/2s=": "doA="}; !reflect.DeepEqual(dead[0].Values, want) {
		t.Fatalf("dead values %q, want %q", dead[0].Values, want)
	}
	if want := map[string]any{"bin": "Ymlu//5va4A=", "café": "☃"}; !reflect.DeepEqual(rows[0].Values, want) {
		t.Fatalf("claimed values %q, want %q", rows[0].Values, want)
	}
	for _, bad := range []any{
		"x",
		[]any{[]any{}},
		[]any{int64(0), []any{}},
		[]any{[]any{}, "x"},
		[]any{[]any{}, []any{"x"}},
		[]any{[]any{"x"}, []any{}},
		[]any{[]any{}, []any{[]any{"1-0", "1", []any{}}}},
		[]any{[]any{}, []any{[]any{"1-0", int64(1), []any{"odd"}}}},
		[]any{[]any{[]any{"1-0", int64(1), []any{"odd"}}}, []any{}},
	} {
		if _, _, err := parseClaim(bad); err == nil {
			t.Errorf("parseClaim(%#v) succeeded", bad)
		}
	}
}
