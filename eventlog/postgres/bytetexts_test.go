package postgres

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// byteTextsPlan writes the bytes pgx's own array codec writes for the
// same [][]byte, after whatever the buffer already holds: NULL elements,
// empty ones, none at all, and a nil array (NULL).
func TestByteTextsEncodesAsPgx(t *testing.T) {
	big := bytes.Repeat([]byte(`{"k":"v"}`), 1000)
	for _, a := range [][][]byte{
		nil,
		{},
		{[]byte(`{}`)},
		{[]byte(`{"a":1}`), nil, []byte(`"x"`)},
		{nil, nil},
		{{}, []byte(`1`)},
		{big, []byte(`[]`), big},
	} {
		for _, prefix := range [][]byte{nil, []byte("earlier parameters")} {
			want, wantErr := pgtype.NewMap().Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, a, bytes.Clone(prefix))
			got, err := byteTextsPlan{}.Encode(byteTexts(a), bytes.Clone(prefix))
			if err != nil || wantErr != nil {
				t.Fatalf("%q: error %v, pgx's %v", a, err, wantErr)
			}
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Errorf("%q after %q:\n got %x\nwant %x", a, prefix, got, want)
			}
		}
	}
}

// On a connection with the codec registered, a byteTexts goes through
// byteTextsPlan in binary and through pgx's codec in text (which it
// writes as the [][]byte it is); other values are left to pgx's codec.
func TestByteTextsCodecDelegates(t *testing.T) {
	plain := pgtype.NewMap()
	m := pgtype.NewMap()
	typ, _ := m.TypeForOID(pgtype.TextArrayOID)
	m.RegisterType(&pgtype.Type{Name: typ.Name, OID: typ.OID, Codec: byteTextsCodec{Codec: typ.Codec}})
	a := [][]byte{[]byte(`{"a":"b c"}`), nil}
	for _, c := range []struct {
		format int16
		value  any
	}{
		{pgtype.BinaryFormatCode, byteTexts(a)},
		{pgtype.TextFormatCode, byteTexts(a)},
		{pgtype.BinaryFormatCode, a},
		{pgtype.BinaryFormatCode, []string{"x", "y"}},
		{pgtype.TextFormatCode, []string{"x", "y"}},
	} {
		want, err := plain.Encode(pgtype.TextArrayOID, c.format, c.value, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Encode(pgtype.TextArrayOID, c.format, c.value, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%T in format %d: %x (%v), want %x", c.value, c.format, got, err, want)
		}
	}
	var back []string
	if err := m.Scan(pgtype.TextArrayOID, pgtype.TextFormatCode, []byte(`{x,"y z"}`), &back); err != nil || len(back) != 2 || back[1] != "y z" {
		t.Errorf("scan through the codec: %q, %v", back, err)
	}
}
