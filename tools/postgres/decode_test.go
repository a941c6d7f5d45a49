package postgres

import (
	"reflect"
	"testing"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		oid  uint32
		raw  string
		want any
	}{
		{"numeric integral", oidNumeric, "42", int64(42)},
		{"numeric exact float", oidNumeric, "0.10", 0.1},
		{"numeric too precise", oidNumeric, "0.12345678901234567890", "0.12345678901234567890"},
		{"numeric beyond int64", oidNumeric, "99999999999999999999", "99999999999999999999"},
		{"numeric NaN", oidNumeric, "NaN", "NaN"},
		{"float infinity", oidFloat8, "Infinity", "Infinity"},
		{"bool false", oidBool, "f", false},
		{"tz with minutes", oidTimestamptz, "2024-05-06 07:08:09+05:30", "2024-05-06T07:08:09+05:30"},
		{"tz infinity", oidTimestamptz, "infinity", "infinity"},
		{"array with bounds", oidInt4Arr, "[0:1]={5,6}", []any{int64(5), int64(6)}},
		{"empty array", oidTextArr, "{}", []any{}},
		{"escaped text array", oidTextArr, `{"a\\b","c,d",e}`, []any{`a\b`, "c,d", "e"}},
		{"malformed array stays text", oidInt4Arr, "{1,2", "{1,2"},
		{"timestamp array", oidTSArr, `{"2024-01-02 03:04:05"}`, []any{"2024-01-02T03:04:05"}},
		{"unknown type is text", 600, "(1,2)", "(1,2)"},
	}
	for _, tt := range tests {
		if got := decode(tt.oid, []byte(tt.raw)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: decode(%d, %q) = %#v, want %#v", tt.name, tt.oid, tt.raw, got, tt.want)
		}
	}
	if decode(oidTextOID, nil) != nil {
		t.Error("NULL must decode to nil")
	}
}
