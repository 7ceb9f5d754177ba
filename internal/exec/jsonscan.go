package exec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ubiksql/ubik/internal/types"
)

// scanDecode is the hot-path JSON decoder: one pass over the object that
// looks each key up among the source's columns and converts the value in
// place, with no parse tree. It is written by hand because decoding is the
// largest per-event cost (fastjson builds a tree and then each column is a
// linear key search; encoding/json is several times slower still). It
// validates the whole line as JSON, skipped values included, and its result
// is checked against the fastjson path by FuzzScanMatchesFastjson.
//
// It returns errFallback for every input it does not decode cleanly: bad
// JSON, a wrong type, a bad timestamp, a missing event time, duplicate keys,
// the types it does not handle (HUGEINT, DECIMAL). The reference decoder
// then decides and words the error, so both paths always agree, errors
// included.
func (d *Decoder) scanDecode(line []byte) ([]types.Value, error) {
	s := scanner{b: line}
	s.ws()
	if !s.eat('{') {
		return nil, errFallback
	}
	for i := range d.seen {
		d.seen[i] = false
	}
	s.ws()
	if s.eat('}') {
		return d.finishScan(&s)
	}
	for p := 0; ; p++ {
		s.ws()
		col, colon, ok := d.scanKey(&s, p)
		if !ok {
			return nil, errFallback
		}
		if !colon {
			s.ws()
			if !s.eat(':') {
				return nil, errFallback
			}
		}
		s.ws()
		if col < 0 {
			if !s.skipValue(0) {
				return nil, errFallback
			}
		} else {
			if d.seen[col] {
				return nil, errFallback // duplicate key: let the reference decide
			}
			d.seen[col] = true
			if !d.scanValue(&s, col) {
				return nil, errFallback
			}
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return d.finishScan(&s)
		}
		return nil, errFallback
	}
}

// keyCacheLen bounds the key-order cache (keys past it take the slow path).
const keyCacheLen = 64

// cachedKey is the key a previous line had at one position: its raw text,
// quotes included, and the ':' when it followed the closing quote directly
// (colon), and its column (-1: not one the query reads).
type cachedKey struct {
	raw   []byte
	col   int
	colon bool
}

// scanKey reads the key at position p of the object and returns its
// column, and whether it also consumed the ':' after it. Lines from one
// producer spell their keys the same way in the same order, so it first
// compares the input with the raw key (and colon) the previous line had at
// p: one comparison instead of a string scan, a column search and the
// separator. A key with escapes is never cached, so a cached raw text
// always reads as exactly one string token (and its ':').
func (d *Decoder) scanKey(s *scanner, p int) (col int, colon, ok bool) {
	if p < len(d.keyCache) {
		if k := &d.keyCache[p]; bytes.HasPrefix(s.b[s.i:], k.raw) {
			s.i += len(k.raw)
			return k.col, k.colon, true
		}
	}
	start := s.i
	key, ok := s.str(&d.keyScratch)
	if !ok {
		return 0, false, false
	}
	col = d.columnOf(key)
	if raw := s.b[start:s.i]; len(raw) == len(key)+2 && p < keyCacheLen {
		if s.i < len(s.b) && s.b[s.i] == ':' {
			s.i++
			raw, colon = s.b[start:s.i], true
		}
		switch {
		case p < len(d.keyCache):
			d.keyCache[p] = cachedKey{raw: append(d.keyCache[p].raw[:0], raw...), col: col, colon: colon}
		case p == len(d.keyCache):
			d.keyCache = append(d.keyCache, cachedKey{raw: append([]byte(nil), raw...), col: col, colon: colon})
		}
	}
	return col, colon, true
}

func (d *Decoder) finishScan(s *scanner) ([]types.Value, error) {
	s.ws()
	if s.i != len(s.b) {
		return nil, errFallback
	}
	for i := range d.src.Columns {
		if d.seen[i] {
			continue
		}
		if i == d.src.TimeCol {
			return nil, errFallback // missing event time: the reference words it
		}
		d.row[i] = types.NullOf(d.src.Columns[i].Type)
	}
	return d.row, nil
}

// columnOf finds the column named key that the query reads, or -1: not a
// column, or one the query does not read (skipped).
func (d *Decoder) columnOf(key []byte) int {
	i := d.columnIndex(key)
	if i >= 0 && d.used != nil && !d.used[i] {
		return -1
	}
	return i
}

// linearColumns is the column count up to which a search of the names
// beats a map lookup; above it a map keeps decoding linear in the event.
const linearColumns = 16

// columnIndex finds the column named key, exactly as spelled (JSON keys
// are case-sensitive), or -1.
func (d *Decoder) columnIndex(key []byte) int {
	if d.colIndex != nil {
		if i, ok := d.colIndex[string(key)]; ok {
			return i
		}
		return -1
	}
	for i, n := range d.names {
		if len(n) == len(key) && n == string(key) {
			return i
		}
	}
	return -1
}

// scanValue converts the value at s into column col; false sends the line
// to the reference decoder.
func (d *Decoder) scanValue(s *scanner, col int) bool {
	c := &d.src.Columns[col]
	if c.JSON {
		return false // the reference path keeps JSON text (NewDecoder avoids this path)
	}
	if s.lit("null") {
		if col == d.src.TimeCol {
			return false
		}
		d.row[col] = types.NullOf(c.Type)
		return true
	}
	switch c.Type.Kind {
	case types.KindDouble, types.KindInteger, types.KindBigInt:
		if s.peek() == '"' {
			// A quoted number: the same conversion as the reference path;
			// a bad one goes there to be reported.
			b, ok := s.str(&d.valScratch[col])
			if !ok {
				return false
			}
			v, msg := quotedNumber(b, c.Type)
			if msg != "" {
				return false
			}
			d.row[col] = v
			return true
		}
	}
	switch c.Type.Kind {
	case types.KindVarchar, types.KindTimestamp, types.KindDate:
		if s.peek() != '"' {
			return false
		}
		b, ascii, ok := s.strASCII(&d.valScratch[col])
		if !ok {
			return false
		}
		switch c.Type.Kind {
		case types.KindVarchar:
			if !ascii {
				b = repairUTF8(b)
			}
			d.row[col] = types.Value{Kind: types.KindVarchar, S: bytesString(b)}
		case types.KindTimestamp:
			us, err := d.ts.Parse(b)
			if err != nil {
				return false
			}
			d.row[col] = types.TS(us)
		case types.KindDate:
			days, err := types.ParseDate(b)
			if err != nil {
				return false
			}
			d.row[col] = types.DateDays(days)
		}
		return true
	case types.KindDouble:
		if x, ok := s.simpleNumber(); ok {
			d.row[col] = types.Float(x)
			return true
		}
		start := s.i
		num, ok := s.number()
		if !ok {
			s.i = start
			x, n := nonFinite(s.b[s.i:])
			if n == 0 {
				return false
			}
			s.i += n
			d.row[col] = types.Float(x)
			return true
		}
		x, ok := simpleFloat(num)
		if !ok {
			var err error
			x, err = strconv.ParseFloat(bytesString(num), 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return false
			}
		}
		d.row[col] = types.Float(x)
		return true
	case types.KindInteger, types.KindBigInt:
		if x, ok := s.simpleInt(); ok && (c.Type.Kind == types.KindBigInt || x >= math.MinInt32 && x <= math.MaxInt32) {
			d.row[col] = types.Value{Kind: c.Type.Kind, I: x}
			return true
		}
		num, ok := s.number()
		if !ok {
			return false
		}
		x, err := strconv.ParseInt(bytesString(num), 10, 64)
		if err != nil || c.Type.Kind == types.KindInteger && (x < math.MinInt32 || x > math.MaxInt32) {
			return false
		}
		d.row[col] = types.Value{Kind: c.Type.Kind, I: x}
		return true
	case types.KindBoolean:
		switch {
		case s.lit("true"):
			d.row[col] = types.Bool(true)
		case s.lit("false"):
			d.row[col] = types.Bool(false)
		default:
			return false
		}
		return true
	}
	return false // HUGEINT, DECIMAL, INTERVAL: the reference path
}

// scanner walks one JSON text.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		// Compact JSON: the next byte is almost always past ' ', which
		// one comparison settles.
		if c := s.b[s.i]; c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return
		}
		s.i++
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) lit(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// str reads a JSON string. Without escapes it returns a slice of the input;
// with them it unescapes into *scratch (fastjson's rules: invalid \u
// sequences are kept as written, lone surrogates become U+FFFD).
func (s *scanner) str(scratch *[]byte) ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	rest := s.b[s.i:]
	i, _ := delimIndex(rest)
	if i < 0 {
		return nil, false
	}
	if rest[i] == '\\' {
		s.i += i
		return s.strEscaped(start, scratch)
	}
	// Raw control characters are accepted, as the reference decoder does.
	s.i += i + 1
	return rest[:i], true
}

// strASCII is str that also reports whether the string's raw bytes are all
// ASCII (so it is valid UTF-8 and needs no repair).
func (s *scanner) strASCII(scratch *[]byte) (b []byte, ascii, ok bool) {
	if !s.eat('"') {
		return nil, false, false
	}
	start := s.i
	rest := s.b[s.i:]
	i, high := delimIndex(rest)
	if i < 0 {
		return nil, false, false
	}
	if rest[i] == '\\' {
		s.i += i
		b, ok := s.strEscaped(start, scratch)
		return b, false, ok
	}
	s.i += i + 1
	if i >= shortStr {
		return rest[:i], isASCII(bytesString(rest[:i])), true
	}
	return rest[:i], high&0x8080808080808080 == 0, true
}

// shortStr is how far delimIndex looks eight bytes at a time.
const shortStr = 32

// delimIndex returns the index of the first '"' or '\\' in b, or -1.
// Most strings of an event are short, and for them a call to
// bytes.IndexByte per delimiter costs more than the scan: the first
// shortStr bytes are read eight at a time, and only a longer string takes
// the vector search. When the index is below shortStr, high is the OR of
// the bytes before it (their high bits say whether they are ASCII).
func delimIndex(b []byte) (i int, high uint64) {
	for ; i < shortStr && i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if m := delimMask(x); m != 0 {
			n := bits.TrailingZeros64(m) / 8
			return i + n, high | x&(1<<(8*n)-1)
		}
		high |= x
	}
	if i < shortStr { // fewer than eight bytes left
		for ; i < len(b); i++ {
			c := b[i]
			if c == '"' || c == '\\' {
				return i, high
			}
			high |= uint64(c)
		}
		return -1, 0
	}
	q := bytes.IndexByte(b[i:], '"')
	if q < 0 {
		return -1, 0
	}
	if e := bytes.IndexByte(b[i:i+q], '\\'); e >= 0 {
		q = e
	}
	return i + q, 0
}

// delimMask has the high bit of each byte of x that is '"' or '\\' set,
// and no bit below the first such byte (the lowest set bit is exact; bits
// above it may be spurious, from the borrow).
func delimMask(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := x ^ ('"' * lo)
	bs := x ^ ('\\' * lo)
	return ((q-lo)&^q | (bs-lo)&^bs) & hi
}

func (s *scanner) strEscaped(start int, scratch *[]byte) ([]byte, bool) {
	out := append((*scratch)[:0], s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			*scratch = out
			return out, true
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		s.i++
		if s.i >= len(s.b) {
			return nil, false
		}
		e := s.b[s.i]
		s.i++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, false // fastjson keeps bad \u text; defer to it
			}
			if utf16.IsSurrogate(r) {
				save := s.i
				if s.lit(`\u`) {
					if r2, ok := s.hex4(); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							out = utf8.AppendRune(out, d)
							continue
						}
					}
				}
				s.i = save
				return nil, false // lone surrogate: the reference's spelling
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

func (s *scanner) hex4() (rune, bool) {
	r, ok := hexAt(s.b, s.i)
	if ok {
		s.i += 4
	}
	return r, ok
}

// number reads a JSON number (RFC 8259 grammar) and returns its text.
func (s *scanner) number() ([]byte, bool) {
	start := s.i
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return nil, false
	}
	if s.eat('.') {
		if !s.digits() {
			return nil, false
		}
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if !s.digits() {
			return nil, false
		}
	}
	return s.b[start:s.i], true
}

// pow10 holds the powers of ten that are exact doubles.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// simpleFloat parses the common JSON number -?digits[.digits] (no
// exponent) whose digits fit 2^53: then the mantissa and the power of ten
// are exact doubles and one division rounds correctly, as ParseFloat would
// (Clinger's fast path, without ParseFloat's general machinery). It
// reports false for every other number, which ParseFloat then reads.
func simpleFloat(num []byte) (float64, bool) {
	i, neg := 0, false
	if len(num) > 0 && num[0] == '-' {
		neg, i = true, 1
	}
	var m uint64
	frac, digits, dot := 0, 0, false
	for ; i < len(num); i++ {
		c := num[i]
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + uint64(c-'0')
			digits++
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, false // an exponent
		}
	}
	if digits == 0 || digits > 15 || frac >= len(pow10) {
		return 0, false // 15 digits keep m below 2^53
	}
	x := float64(m) / pow10[frac]
	if neg {
		x = -x
	}
	return x, true
}

// simpleNumber reads, in one pass, a number of the form simpleFloat
// parses exactly: -?(0|[1-9][0-9]*)(\.[0-9]+)? with at most 15 digits, not
// followed by an exponent or another digit. Anything else reports false
// with s unmoved, for number and simpleFloat (or ParseFloat) to read.
func (s *scanner) simpleNumber() (float64, bool) {
	b, i := s.b, s.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	if i >= len(b) {
		return 0, false
	}
	var m uint64
	nd := 0
	if b[i] == '0' {
		i++
		nd = 1
	} else {
		for i < len(b) && b[i]-'0' <= 9 {
			m = m*10 + uint64(b[i]-'0')
			nd++
			i++
		}
		if nd == 0 {
			return 0, false
		}
	}
	frac := 0
	if i < len(b) && b[i] == '.' {
		i++
		for i < len(b) && b[i]-'0' <= 9 {
			m = m*10 + uint64(b[i]-'0')
			frac++
			i++
		}
		if frac == 0 {
			return 0, false
		}
	}
	// A digit here follows a leading 0 ("01": not JSON); an exponent
	// needs the general path; 15 digits keep m below 2^53.
	if i < len(b) && (b[i]-'0' <= 9 || b[i]|0x20 == 'e') || nd+frac > 15 {
		return 0, false
	}
	x := float64(m) / pow10[frac]
	if neg {
		x = -x
	}
	s.i = i
	return x, true
}

// simpleInt reads, in one pass, an integer of at most 18 digits (so it
// cannot overflow int64): -?(0|[1-9][0-9]*) not followed by a digit, a
// fraction or an exponent. Anything else reports false with s unmoved,
// for number and ParseInt to read.
func (s *scanner) simpleInt() (int64, bool) {
	b, i := s.b, s.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var x int64
	if i < len(b) && b[i] == '0' {
		i++
	} else {
		for i < len(b) && b[i]-'0' <= 9 {
			x = x*10 + int64(b[i]-'0')
			i++
		}
	}
	if n := i - start; n == 0 || n > 18 {
		return 0, false
	}
	if i < len(b) && (b[i]-'0' <= 9 || b[i] == '.' || b[i]|0x20 == 'e') {
		return 0, false
	}
	if neg {
		x = -x
	}
	s.i = i
	return x, true
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// maxSkipDepth bounds nesting in skipped values (fastjson's limit is the
// same order); deeper input goes to the reference decoder.
const maxSkipDepth = 64

// skipValue validates and skips one value.
func (s *scanner) skipValue(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	var tmp []byte
	switch s.peek() {
	case '"':
		_, ok := s.str(&tmp)
		return ok
	case '{':
		s.i++
		s.ws()
		if s.eat('}') {
			return true
		}
		for {
			s.ws()
			if _, ok := s.str(&tmp); !ok {
				return false
			}
			s.ws()
			if !s.eat(':') {
				return false
			}
			s.ws()
			if !s.skipValue(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return s.eat('}')
		}
	case '[':
		s.i++
		s.ws()
		if s.eat(']') {
			return true
		}
		for {
			s.ws()
			if !s.skipValue(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(',') {
				continue
			}
			return s.eat(']')
		}
	case 't':
		return s.lit("true")
	case 'f':
		return s.lit("false")
	case 'n':
		return s.lit("null")
	}
	start := s.i
	if _, ok := s.number(); ok {
		return true
	}
	s.i = start
	_, n := nonFinite(s.b[s.i:])
	s.i += n
	return n > 0
}
