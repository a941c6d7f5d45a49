package postgres

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// byteTexts is a text[] parameter given as its elements' bytes (text's
// binary form), a nil element being NULL: the events' payloads and metas.
//
// pgx encodes a [][]byte element by element, appending each to a buffer
// that starts small for every statement, so each payload is copied again
// at every doubling of that buffer. On a connection whose type map has
// byteTextsCodec (registerByteTexts: the pools Open makes) the array is
// encoded in one pass into a buffer grown once to its size; the bytes are
// those pgx writes. Elsewhere pgx encodes it as the [][]byte it is.
type byteTexts [][]byte

// byteTextsCodec is the text[] codec of a connection of Open's pool: the
// one pgx registered, but for a byteTexts value in binary format.
type byteTextsCodec struct {
	pgtype.Codec
}

// PlanEncode implements pgtype.Codec.
func (c byteTextsCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(byteTexts); ok && format == pgtype.BinaryFormatCode {
		return byteTextsPlan{}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// registerByteTexts gives conn's type map byteTextsCodec for text[]. It is
// Open's pool's AfterConnect.
func registerByteTexts(conn *pgx.Conn) {
	m := conn.TypeMap()
	t, ok := m.TypeForOID(pgtype.TextArrayOID)
	if !ok {
		return
	}
	if _, done := t.Codec.(byteTextsCodec); done {
		return
	}
	m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: byteTextsCodec{Codec: t.Codec}})
}

// byteTextsPlan encodes a byteTexts as pgx's array codec does a
// [][]byte: a one-dimensional array header (the null flag set when an
// element is nil, element type text, lower bound 1), then each element's
// length (-1 for NULL) and bytes.
type byteTextsPlan struct{}

// Encode implements pgtype.EncodePlan.
func (byteTextsPlan) Encode(value any, buf []byte) ([]byte, error) {
	a := value.(byteTexts)
	if a == nil {
		return nil, nil // NULL, as pgx has it for a nil slice
	}
	size, hasNull := 20, int32(0)
	for _, e := range a {
		size += 4 + len(e)
		if e == nil {
			hasNull = 1
		}
	}
	// Grown once, to what the array takes. Lengths and counts are
	// written as pgx writes them: int32(n), whose bits uint32(n) has.
	buf = slices.Grow(buf, size)
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, uint32(hasNull))
	buf = binary.BigEndian.AppendUint32(buf, pgtype.TextOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(a))) // length
	buf = binary.BigEndian.AppendUint32(buf, 1)              // lower bound
	for _, e := range a {
		if e == nil {
			buf = binary.BigEndian.AppendUint32(buf, math.MaxUint32) // -1
			continue
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(e)))
		buf = append(buf, e...)
	}
	return buf, nil
}
