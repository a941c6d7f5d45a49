package jsonnum

import (
	"reflect"
	"testing"
)

func TestDecimal(t *testing.T) {
	for _, c := range []struct {
		in   string
		want any
	}{
		{"42", int64(42)},
		{"-7.000", int64(-7)},
		{"12.50", 12.5},
		{"0.1", 0.1},
		{"+3.25", 3.25},
		{"9223372036854775808", "9223372036854775808"},
		{"12345678901234567890.123456789", "12345678901234567890.123456789"},
		{"3.14159265358979323846", "3.14159265358979323846"},
		{"NaN", "NaN"},
		{"Infinity", "Infinity"},
		{"not a number", "not a number"},
	} {
		if got := Decimal(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Decimal(%q) = %#v, want %#v", c.in, got, c.want)
		}
	}
}
