package postgres

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// An integer column's text decodes to what pgx's codec and normalize make
// of it, the codec's error included, and costs no allocation beyond the
// int64's box (pgx's codec allocated its target as well).
func TestDecodeIntegersAsTheCodec(t *testing.T) {
	m := pgtype.NewMap()
	for _, c := range []struct {
		oid  uint32
		text []string
	}{
		{pgtype.Int8OID, []string{"0", "-1", "255", "256", "123456789012", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "1.5", "", " 1", "+7"}},
		{pgtype.Int4OID, []string{"0", "-2147483648", "2147483647", "2147483648", "x"}},
		{pgtype.Int2OID, []string{"0", "-32768", "32767", "32768", "-32769"}},
	} {
		fd := pgconn.FieldDescription{Name: "c", DataTypeOID: c.oid, Format: pgtype.TextFormatCode}
		typ, _ := m.TypeForOID(c.oid)
		for _, s := range c.text {
			got, err := decode(m, fd, []byte(s), nil)
			want, wantErr := typ.Codec.DecodeValue(m, c.oid, pgtype.TextFormatCode, []byte(s))
			if wantErr == nil {
				want = normalize(want)
			}
			if !reflect.DeepEqual(got, want) || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Errorf("oid %d %q: %#v, %v; the codec's %#v, %v", c.oid, s, got, err, want, wantErr)
			}
		}
	}
	fd := pgconn.FieldDescription{Name: "id", DataTypeOID: pgtype.Int8OID, Format: pgtype.TextFormatCode}
	raw := []byte("123456")
	if n := testing.AllocsPerRun(100, func() { _, _ = decode(m, fd, raw, nil) }); n > 1 {
		t.Errorf("decoding an int8 makes %v allocations, want at most 1", n)
	}
}
