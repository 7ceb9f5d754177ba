package changelog

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ubiksql/ubik/internal/types"
)

var (
	pySeed = flag.Uint64("contract.seed", 0, "seed of TestPythonDifferential (0: from the clock)")
	pyRows = flag.Int("contract.rows", 100_000, "rows of TestPythonDifferential")
)

// pyOracle renders each input line with Python's json.dumps, independently of
// this package: strings are decoded from raw bytes with
// bytes.decode("utf-8", "replace"), doubles come from their IEEE bits
// (non-finite -> None), timestamps and dates from datetime, decimals from an
// exact decimal.Decimal. Output: key TAB value, one line per input line.
const pyOracle = `
import sys, json, math, struct, datetime
from decimal import Decimal

EPOCH = datetime.datetime(1970, 1, 1)

def ts_text(us):
    d = EPOCH + datetime.timedelta(microseconds=us)
    s = '%04d-%02d-%02d %02d:%02d:%02d' % (d.year, d.month, d.day, d.hour, d.minute, d.second)
    if d.microsecond:
        s += ('.%06d' % d.microsecond).rstrip('0')
    return s

def date_text(days):
    d = datetime.date(1970, 1, 1) + datetime.timedelta(days=days)
    return '%04d-%02d-%02d' % (d.year, d.month, d.day)

class Raw:
    def __init__(self, text): self.text = text

def cell(tok):
    k, p = tok[0], tok[1:]
    if k == 'N': return None
    if k == 'S': return bytes.fromhex(p).decode('utf-8', 'replace')
    if k == 'F':
        f = struct.unpack('>d', bytes.fromhex(p))[0]
        return f if math.isfinite(f) else None
    if k == 'T': return ts_text(int(p))
    if k == 'D': return date_text(int(p))
    if k == 'B': return p == '1'
    if k == 'I': return int(p)
    if k == 'M':
        u, s = p.split(':')
        u = int(u)
        digits = tuple(int(c) for c in str(abs(u)))
        return Raw(format(Decimal((1 if u < 0 else 0, digits, -int(s))), 'f'))
    raise ValueError('bad token ' + tok)

def dumps(v):
    return v.text if isinstance(v, Raw) else json.dumps(v)

out = sys.stdout
for line in sys.stdin:
    toks = line.split()
    cols = [bytes.fromhex(h).decode('utf-8', 'replace') for h in toks[0][1:].split(',')]
    cells = [cell(t) for t in toks[1:]]
    if not cells:
        cols = []
    if any(isinstance(c, Raw) for c in cells):
        key = '[' + ', '.join(dumps(c) for c in cells) + ']'
    else:
        key = json.dumps(cells)
    value = '{' + ', '.join(json.dumps(n) + ': ' + dumps(c) for n, c in zip(cols, cells)) + '}'
    out.write(key + '\t' + value + '\n')
`

// TestPythonDifferential renders random rows with AppendKey/AppendValue and
// with Python's json.dumps in one python3 process, and compares the bytes.
func TestPythonDifferential(t *testing.T) {
	seed := *pySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := *pyRows
	if testing.Short() {
		n = 10_000
	}
	failed := false
	defer func() {
		if failed || t.Failed() {
			t.Logf("reproduce with: go test ./changelog -run TestPythonDifferential -contract.seed=%d", seed)
		}
	}()

	rows := make([][]types.Value, n)
	cols := make([][]string, n)
	var in bytes.Buffer
	for i := range rows {
		k := rng.IntN(7)
		rows[i] = make([]types.Value, k)
		cols[i] = make([]string, k)
		in.WriteByte('C')
		for j := range k {
			rows[i][j] = randCell(rng)
			cols[i][j] = randString(rng)
			if j > 0 {
				in.WriteByte(',')
			}
			in.WriteString(hex.EncodeToString([]byte(cols[i][j])))
		}
		for _, c := range rows[i] {
			in.WriteByte(' ')
			in.WriteString(oracleToken(c))
		}
		in.WriteByte('\n')
	}

	cmd := exec.Command("python3", "-c", pyOracle)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		failed = true
		t.Fatalf("python3 oracle: %v\n%s", err, stderr.Bytes())
	}

	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var key, val []byte
	mismatches := 0
	i := 0
	for ; sc.Scan(); i++ {
		if i >= n {
			failed = true
			t.Fatalf("python3 printed more than %d lines", n)
		}
		want := sc.Bytes()
		tab := bytes.IndexByte(want, '\t')
		if tab < 0 {
			failed = true
			t.Fatalf("python3 line %d has no tab: %q", i+1, want)
		}
		key = AppendKey(key[:0], rows[i])
		val = AppendValue(val[:0], cols[i], rows[i])
		if !bytes.Equal(key, want[:tab]) || !bytes.Equal(val, want[tab+1:]) {
			failed = true
			mismatches++
			if mismatches <= 10 {
				t.Errorf("row %d (cells %s):\n got key   %s\nwant key   %s\n got value %s\nwant value %s",
					i, describeCells(rows[i]), key, want[:tab], val, want[tab+1:])
			}
		}
	}
	if i != n {
		failed = true
		t.Fatalf("python3 printed %d lines for %d rows", i, n)
	}
	if mismatches > 0 {
		t.Errorf("%d of %d rows differ from python3", mismatches, n)
	}
}

func describeCells(cells []types.Value) string {
	var b bytes.Buffer
	for _, c := range cells {
		fmt.Fprintf(&b, "%v:%s ", c.Kind, oracleToken(c))
	}
	return b.String()
}

// oracleToken is the cell's token on the oracle's input line.
func oracleToken(v types.Value) string {
	if v.Null {
		return "N"
	}
	switch v.Kind {
	case types.KindVarchar:
		return "S" + hex.EncodeToString([]byte(v.S))
	case types.KindDouble:
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], math.Float64bits(v.F))
		return "F" + hex.EncodeToString(b[:])
	case types.KindTimestamp:
		return "T" + strconv.FormatInt(v.I, 10)
	case types.KindDate:
		return "D" + strconv.FormatInt(v.I, 10)
	case types.KindBoolean:
		return "B" + strconv.FormatInt(v.I, 10)
	case types.KindInteger, types.KindBigInt:
		return "I" + strconv.FormatInt(v.I, 10)
	case types.KindHugeInt:
		return "I" + v.Int128().String()
	case types.KindDecimal:
		return "M" + v.Int128().String() + ":" + strconv.Itoa(int(v.Scale))
	}
	panic("no oracle token for " + v.Kind.String())
}

// Range Python's datetime covers: 0001-01-01 to 9999-12-31 23:59:59.999999.
const (
	minPyMicros = -62135596800_000000
	maxPyMicros = 253402300799_999999
	minPyDays   = -719162
	maxPyDays   = 2932896
)

func randCell(rng *rand.Rand) types.Value {
	kinds := []types.Kind{types.KindVarchar, types.KindVarchar, types.KindDouble, types.KindDouble,
		types.KindTimestamp, types.KindDate, types.KindBoolean, types.KindInteger, types.KindBigInt,
		types.KindHugeInt, types.KindDecimal}
	k := kinds[rng.IntN(len(kinds))]
	if rng.IntN(12) == 0 {
		return types.Value{Kind: k, Null: true}
	}
	switch k {
	case types.KindVarchar:
		return types.Str(randString(rng))
	case types.KindDouble:
		return types.Float(randDouble(rng))
	case types.KindTimestamp:
		us := minPyMicros + rng.Int64N(maxPyMicros-minPyMicros+1)
		switch rng.IntN(4) { // whole seconds, milliseconds, microseconds
		case 0:
			us -= us % 1_000_000
		case 1:
			us -= us % 1_000
		}
		if rng.IntN(8) == 0 { // near the epoch, both sides
			us = rng.Int64N(2*microsPerDay) - microsPerDay
		}
		return types.TS(us)
	case types.KindDate:
		return types.DateDays(minPyDays + rng.Int64N(maxPyDays-minPyDays+1))
	case types.KindBoolean:
		return types.Bool(rng.IntN(2) == 0)
	case types.KindInteger:
		return types.Int(int32(rng.Uint32()))
	case types.KindBigInt:
		switch rng.IntN(8) {
		case 0:
			return types.Big(math.MinInt64)
		case 1:
			return types.Big(math.MaxInt64)
		case 2:
			return types.Big(rng.Int64N(2001) - 1000)
		}
		return types.Big(int64(rng.Uint64()))
	case types.KindHugeInt:
		return types.Huge(randInt128(rng))
	case types.KindDecimal:
		return types.Dec(randInt128(rng), uint8(rng.IntN(39)))
	}
	panic("unreachable")
}

func randInt128(rng *rand.Rand) types.Int128 {
	switch rng.IntN(6) {
	case 0:
		return types.Int128{Hi: math.MinInt64}
	case 1:
		return types.Int128{Hi: math.MaxInt64, Lo: math.MaxUint64}
	case 2:
		return types.I128(rng.Int64N(20001) - 10000)
	case 3:
		return types.I128(int64(rng.Uint64()))
	case 4: // around 2^64 and 1e19, where the digit loop changes shape
		x := types.Int128{Hi: int64(rng.IntN(3)), Lo: uint64(rng.IntN(1e6)) - 5e5 + 1e19}
		if rng.IntN(2) == 0 {
			x = x.Neg()
		}
		return x
	}
	return types.Int128{Hi: int64(rng.Uint64()), Lo: rng.Uint64()}
}

func randDouble(rng *rand.Rand) float64 {
	switch rng.IntN(14) {
	case 0:
		return math.Float64frombits(rng.Uint64()) // any bit pattern, NaN payloads included
	case 1:
		return []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(),
			math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 2.2250738585072014e-308}[rng.IntN(9)]
	case 2: // subnormal
		f := math.Float64frombits(rng.Uint64() & (1<<52 - 1))
		if rng.IntN(2) == 0 {
			f = -f
		}
		return f
	case 3: // around the fixed/scientific boundaries 1e-4 and 1e16
		f := []float64{1e-4, 1e-5, 1e15, 1e16, 9999999999999998, 0.00009999999999999999}[rng.IntN(6)]
		for range rng.IntN(3) {
			if rng.IntN(2) == 0 {
				f = math.Nextafter(f, 0)
			} else {
				f = math.Nextafter(f, math.Inf(1))
			}
		}
		return f
	case 4: // cents
		return float64(rng.Int64N(2_000_000)-1_000_000) / 100
	case 5: // integers past 2^53
		return float64(rng.Int64())
	case 6: // a power of ten times a short mantissa
		return float64(rng.IntN(1000)) * math.Pow(10, float64(rng.IntN(40)-20))
	}
	// Uniform over exponents: exercise every notation.
	return math.Float64frombits(rng.Uint64()&^(0x7ff<<52) | uint64(rng.IntN(2046)+1)<<52)
}

var hostileRunes = []rune{'"', '\\', '/', '\n', '\r', '\t', '\b', '\f', 0, 0x1f, 0x7f, 0x80, 0xff,
	0xe9, 0x2028, 0x2029, 0xfeff, 0xfffd, 0xffff, 0x4e2d, 0x1f600, 0x10000, 0x10ffff, '<', '&', '\''}

var hostileBytes = []string{
	"\xff", "\xfe", "\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xc2", "\xe2\x82", "\xe0\x80\x80",
	"\xe0\xa0", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf0\x9f\x98", "\xf0\x80\x80\x80", "\xf4\x90\x80\x80",
	"\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xf0\x9f", "\xe2\x82\xac\x80",
}

func randString(rng *rand.Rand) string {
	var b []byte
	for range rng.IntN(24) {
		switch rng.IntN(8) {
		case 0, 1, 2:
			b = append(b, byte(0x20+rng.IntN(0x5f)))
		case 3:
			b = utf8.AppendRune(b, hostileRunes[rng.IntN(len(hostileRunes))])
		case 4:
			b = append(b, hostileBytes[rng.IntN(len(hostileBytes))]...)
		case 5:
			b = append(b, byte(rng.IntN(256)))
		case 6:
			r := rune(rng.IntN(0x110000))
			if r >= 0xd800 && r <= 0xdfff {
				r = 0xfffd
			}
			b = utf8.AppendRune(b, r)
		case 7:
			b = append(b, byte(rng.IntN(0x20)))
		}
	}
	return string(b)
}
