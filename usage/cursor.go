package usage

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// Cursor is a position in a backend's ingestion order, bound to one query
// on one table.
// Backends fill the fields they need:
//
//	pgusage: A = transaction id (xid8) of the last row, B = its sequence number
//	chusage: A = ingestion time (ms) of the last row,  K = its key
//
// A zero Cursor (Started false) is the position before the first row.
type Cursor struct {
	Started     bool
	Store       byte   // 'p' PostgreSQL, 'c' ClickHouse
	Fingerprint uint64 // Scope of the ListSpec.Fingerprint and table it was issued for
	A, B        int64
	K           string
}

const cursorVersion = 1

// maxCursorBytes bounds what DecodeCursor accepts (a key is at most
// MaxKeyBytes, the rest is a few dozen bytes).
const maxCursorBytes = 4 * (MaxKeyBytes + 64) / 3

// Encode returns the opaque, URL-safe text of the cursor.
func (c Cursor) Encode() string {
	b := make([]byte, 0, 32+len(c.K))
	b = append(b, cursorVersion, c.Store)
	b = binary.BigEndian.AppendUint64(b, c.Fingerprint)
	b = binary.AppendVarint(b, c.A)
	b = binary.AppendVarint(b, c.B)
	b = binary.AppendUvarint(b, uint64(len(c.K)))
	b = append(b, c.K...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor parses cursor text for a store and a query. An empty string
// is the start. A cursor from another store, table or query (fp is the
// query's fingerprint bound to the table by Scope) is ErrCursorMismatch;
// anything malformed is ErrInvalidCursor.
func DecodeCursor(s string, store byte, fp uint64) (Cursor, error) {
	if s == "" {
		return Cursor{Store: store, Fingerprint: fp}, nil
	}
	if len(s) > maxCursorBytes {
		return Cursor{}, fmt.Errorf("%w: %d bytes long", ErrInvalidCursor, len(s))
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, fmt.Errorf("%w: not base64url: %v", ErrInvalidCursor, err)
	}
	if len(b) < 10 || b[0] != cursorVersion {
		return Cursor{}, fmt.Errorf("%w: unknown format", ErrInvalidCursor)
	}
	c := Cursor{Started: true, Store: b[1], Fingerprint: binary.BigEndian.Uint64(b[2:10])}
	rest := b[10:]
	var n int
	if c.A, n = binary.Varint(rest); n <= 0 {
		return Cursor{}, fmt.Errorf("%w: truncated", ErrInvalidCursor)
	}
	rest = rest[n:]
	if c.B, n = binary.Varint(rest); n <= 0 {
		return Cursor{}, fmt.Errorf("%w: truncated", ErrInvalidCursor)
	}
	rest = rest[n:]
	kl, n := binary.Uvarint(rest)
	if n <= 0 || kl != uint64(len(rest)-n) {
		return Cursor{}, fmt.Errorf("%w: bad key length", ErrInvalidCursor)
	}
	c.K = string(rest[n:])
	if c.Encode() != s {
		// Padded varints or stray bits: one cursor has one spelling.
		return Cursor{}, fmt.Errorf("%w: not in canonical form", ErrInvalidCursor)
	}
	if c.Store != store || c.Fingerprint != fp {
		return Cursor{}, ErrCursorMismatch
	}
	return c, nil
}

// Scope binds a query's fingerprint to the table it reads: table is the
// backend's identity text for its table (server, database, table), so a
// cursor from another table or store is ErrCursorMismatch rather than a
// position that silently skips rows.
func Scope(fp uint64, table string) uint64 {
	h := fnv.New64a()
	h.Write(binary.BigEndian.AppendUint64(nil, fp))
	h.Write([]byte(table))
	return h.Sum64()
}

// fingerprint hashes the parts of a list query that decide which rows it
// sees, so a cursor cannot be replayed against a different query.
func fingerprint(s ListSpec) uint64 {
	h := fnv.New64a()
	var buf []byte
	str := func(x string) {
		buf = binary.AppendUvarint(buf[:0], uint64(len(x)))
		h.Write(buf)
		h.Write([]byte(x))
	}
	num := func(x int64) {
		buf = binary.AppendVarint(buf[:0], x)
		h.Write(buf)
	}
	str(s.Meter)
	num(s.FromMs)
	num(s.ToMs)
	for _, f := range s.Filters {
		str(f.Dim)
		if f.Absent {
			num(-1)
			continue
		}
		num(int64(f.Value.kind))
		switch f.Value.kind {
		case KindString:
			str(f.Value.s)
		case KindNumber:
			str(f.Value.s)
		case KindBool:
			if f.Value.b {
				num(1)
			} else {
				num(0)
			}
		}
	}
	return h.Sum64()
}
