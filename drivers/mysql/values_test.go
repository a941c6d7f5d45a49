package mysql

import (
	"reflect"
	"testing"
	"time"
)

func TestConvert(t *testing.T) {
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	tests := []struct {
		name     string
		typeName string
		in       any
		want     any
		wantErr  bool
	}{
		{"null", "VARCHAR", nil, nil, false},
		{"int64", "BIGINT", int64(-5), int64(-5), false},
		{"unsigned bigint", "UNSIGNED BIGINT", uint64(18446744073709551615), "18446744073709551615", false},
		{"small unsigned", "UNSIGNED BIGINT", uint64(7), int64(7), false},
		{"double", "DOUBLE", 2.5, 2.5, false},
		{"float keeps its decimal form", "FLOAT", float32(0.1), 0.1, false},
		{"text", "VARCHAR", []byte("héllo"), "héllo", false},
		{"binary", "VARBINARY", []byte{0xff, 0x01}, "/wE=", false},
		{"datetime", "DATETIME", ts, "2024-05-06T07:08:09.123456Z", false},
		{"integral decimal", "DECIMAL", []byte("42.000"), int64(42), false},
		{"negative integral decimal", "DECIMAL", []byte("-7"), int64(-7), false},
		{"fractional decimal", "DECIMAL", []byte("12.50"), 12.5, false},
		{"huge decimal", "DECIMAL", []byte("123456789012345678901234"), "123456789012345678901234", false},
		{"bad decimal", "DECIMAL", []byte("x"), nil, true},
		{"json object", "JSON", []byte(`{"a": 1, "b": [2.5, "x"], "c": 12345678901234567}`),
			map[string]any{"a": int64(1), "b": []any{2.5, "x"}, "c": int64(12345678901234567)}, false},
		{"json scalar", "JSON", []byte(`"s"`), "s", false},
		{"bad json", "JSON", []byte(`{`), nil, true},
		{"bit", "BIT", []byte{0x01, 0x02}, int64(258), false},
		{"lower-case type name", "decimal", []byte("3"), int64(3), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := convert(tt.typeName, tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("convert(%s, %#v) error = %v, want error %v", tt.typeName, tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("convert(%s, %#v) = %#v (%T), want %#v (%T)", tt.typeName, tt.in, got, got, tt.want, tt.want)
			}
		})
	}
}

func TestCompileMark(t *testing.T) {
	tests := []struct {
		name    string
		in      any
		wantNil bool
		wantErr bool
	}{
		{"nil", nil, true, false},
		{"blank", " \n\t", true, false},
		{"statement", "UPDATE q SET status = 'claimed' WHERE id IN ({{ keys | join(',') }})", false, false},
		{"not a string", 3, false, true},
		{"bad template", "UPDATE {{ keys ", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := compileMark(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && (got == nil) != tt.wantNil {
				t.Fatalf("template nil = %v, want %v", got == nil, tt.wantNil)
			}
		})
	}
}
