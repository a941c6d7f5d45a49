package natsconsumer_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/drivers/natsconsumer"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    map[string]any
		want    natsconsumer.Options
		wantErr string
	}{
		{name: "stream only", opts: map[string]any{"stream": "JOBS"}, want: natsconsumer.Options{Stream: "JOBS"}},
		{name: "everything", opts: map[string]any{"stream": " JOBS ", "consumer": "c", "subject": "jobs.>", "dead_letter_subject": "dead.jobs", "url": "nats://x"},
			want: natsconsumer.Options{Stream: "JOBS", Consumer: "c", Subject: "jobs.>", DeadLetterSubject: "dead.jobs"}},
		{name: "durable alias", opts: map[string]any{"stream": "S", "durable": "d"}, want: natsconsumer.Options{Stream: "S", Consumer: "d"}},
		{name: "same consumer twice", opts: map[string]any{"stream": "S", "durable": "d", "consumer": "d"}, want: natsconsumer.Options{Stream: "S", Consumer: "d"}},
		{name: "unknown keys ignored", opts: map[string]any{"stream": "S", "batch": 3}, want: natsconsumer.Options{Stream: "S"}},
		{name: "no stream", opts: map[string]any{"consumer": "c"}, wantErr: `option "stream" is required`},
		{name: "stream not a string", opts: map[string]any{"stream": 3}, wantErr: `option "stream" is int`},
		{name: "bad stream name", opts: map[string]any{"stream": "a.b"}, wantErr: "not a valid stream name"},
		{name: "bad consumer name", opts: map[string]any{"stream": "S", "consumer": "a b"}, wantErr: "not a valid consumer name"},
		{name: "conflicting consumers", opts: map[string]any{"stream": "S", "durable": "d", "consumer": "c"}, wantErr: "different consumers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := natsconsumer.ParseOptions(tt.opts, nil)
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

func TestConsumerName(t *testing.T) {
	a := natsconsumer.ConsumerName("exec-1/start#1")
	if !strings.HasPrefix(a, "cursorflow_exec-1_start_1_") || strings.ContainsAny(a, ".*>/ #") {
		t.Fatalf("ConsumerName = %q", a)
	}
	if b := natsconsumer.ConsumerName("exec-1_start_1"); b == a {
		t.Fatalf("loop ids that sanitize alike share consumer %q", a)
	}
	if again := natsconsumer.ConsumerName("exec-1/start#1"); again != a {
		t.Fatal("ConsumerName is not deterministic")
	}
	if long := natsconsumer.ConsumerName(strings.Repeat("z", 500)); len(long) > 100 {
		t.Fatalf("ConsumerName of a long loop id has %d characters", len(long))
	}
}

func TestValues(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]any
	}{
		{`{"n": 1, "f": 2.5, "s": "x", "l": [1, {"a": null}]}`, map[string]any{"n": int64(1), "f": 2.5, "s": "x", "l": []any{int64(1), map[string]any{"a": nil}}}},
		// An integer past int64 keeps its digits (a float64 would be
		// 12345678901234567168).
		{`  {"big": 12345678901234567890, "e": 1e19}`, map[string]any{"big": "12345678901234567890", "e": 1e19}},
		{`[1, 2]`, map[string]any{"data": "[1, 2]"}},
		{`plain text`, map[string]any{"data": "plain text"}},
		{`{"a": 1} {"b": 2}`, map[string]any{"data": `{"a": 1} {"b": 2}`}},
		{`{broken`, map[string]any{"data": "{broken"}},
		{``, map[string]any{"data": ""}},
		{"caf\u00e9 \u2603", map[string]any{"data": "caf\u00e9 \u2603"}},
		// Not UTF-8: base64, flagged, whatever the shape (a JSON object
		// holding such bytes would decode with U+FFFD in their place).
		{"bin\xff\xfeok\x80", map[string]any{"data": "Ymlu//5va4A=", "data_base64": true}},
		{`{"s": "` + "\xff" + `"}`, map[string]any{"data": "eyJzIjogIv8ifQ==", "data_base64": true}},
	}
	for _, tt := range tests {
		if got := natsconsumer.Values([]byte(tt.in)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Values(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
}
