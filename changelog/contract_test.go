package changelog

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/types"
)

// The reference vectors live at the repository root (testdata/contract); see
// its README.md for where they come from.
const (
	keyVectorsPath = "../testdata/contract/key_vectors.jsonl"
	castTextPath   = "../testdata/contract/duckdb_cast_text.jsonl"
)

// readJSONL calls fn for each line of path with its 1-based line number.
func readJSONL(t *testing.T, path string, fn func(line int, raw []byte)) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open reference vectors: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	n := 0
	for sc.Scan() {
		n++
		fn(n, sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return n
}

type vectorCell struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
	Bits  string          `json:"bits"`
	US    *int64          `json:"us"`
	Days  *int64          `json:"days"`
	Text  *string         `json:"text"`
}

var decimalType = regexp.MustCompile(`^DECIMAL\((\d+),(\d+)\)$`)

// cellValue builds the types.Value a key_vectors.jsonl cell describes.
func cellValue(c vectorCell) (types.Value, error) {
	isNull := len(c.Value) == 0 || string(c.Value) == "null"
	switch c.Type {
	case "VARCHAR":
		if isNull {
			return types.NullOf(types.Varchar), nil
		}
		var s string
		if err := json.Unmarshal(c.Value, &s); err != nil {
			return types.Value{}, err
		}
		return types.Str(s), nil
	case "BIGINT":
		if isNull {
			return types.NullOf(types.BigInt), nil
		}
		var s string
		if err := json.Unmarshal(c.Value, &s); err != nil {
			return types.Value{}, err
		}
		i, err := strconv.ParseInt(s, 10, 64)
		return types.Big(i), err
	case "BOOLEAN":
		if isNull {
			return types.NullOf(types.Boolean), nil
		}
		var b bool
		err := json.Unmarshal(c.Value, &b)
		return types.Bool(b), err
	case "DOUBLE":
		if c.Bits == "" {
			return types.NullOf(types.Double), nil
		}
		u, err := strconv.ParseUint(c.Bits, 16, 64)
		return types.Float(math.Float64frombits(u)), err
	case "TIMESTAMP":
		if c.US == nil {
			return types.NullOf(types.Timestamp), nil
		}
		return types.TS(*c.US), nil
	case "DATE":
		if c.Days == nil {
			return types.NullOf(types.Date), nil
		}
		return types.DateDays(*c.Days), nil
	}
	if m := decimalType.FindStringSubmatch(c.Type); m != nil {
		w, _ := strconv.Atoi(m[1])
		s, _ := strconv.Atoi(m[2])
		if c.Text == nil {
			return types.NullOf(types.Decimal(uint8(w), uint8(s))), nil
		}
		u, err := parseDecimalRounded(*c.Text, s, true)
		if err != nil {
			return types.Value{}, err
		}
		return types.Dec(u, uint8(s)), nil
	}
	return types.Value{}, fmt.Errorf("unknown cell type %q", c.Type)
}

// parseDecimalRounded parses a decimal literal (digits, optional fraction,
// optional exponent) into an unscaled integer at scale, rounding half away
// from zero as DuckDB's string-to-DECIMAL cast does. With exact set, any
// rounding is an error.
func parseDecimalRounded(text string, scale int, exact bool) (types.Int128, error) {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return types.Int128{}, fmt.Errorf("bad decimal %q", text)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	num, den := new(big.Int).Set(r.Num()), r.Denom()
	neg := num.Sign() < 0
	num.Abs(num)
	q, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if rem.Sign() != 0 {
		if exact {
			return types.Int128{}, fmt.Errorf("decimal %q has more than %d fraction digits", text, scale)
		}
		if new(big.Int).Lsh(rem, 1).Cmp(den) >= 0 {
			q.Add(q, big.NewInt(1))
		}
	}
	if neg {
		q.Neg(q)
	}
	x, ok := types.Int128FromBig(q)
	if !ok {
		return types.Int128{}, fmt.Errorf("decimal %q overflows 128 bits", text)
	}
	return x, nil
}

// TestKeyVectors: every row of key_vectors.jsonl must encode to the exact key
// and value bytes, through the package functions and through an Encoder.
func TestKeyVectors(t *testing.T) {
	var key, val []byte
	n := readJSONL(t, keyVectorsPath, func(line int, raw []byte) {
		var row struct {
			Cells   []vectorCell `json:"cells"`
			Columns []string     `json:"columns"`
			Key     string       `json:"key"`
			Value   string       `json:"value"`
		}
		if err := json.Unmarshal(raw, &row); err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		cells := make([]types.Value, len(row.Cells))
		for i, c := range row.Cells {
			v, err := cellValue(c)
			if err != nil {
				t.Fatalf("line %d cell %d: %v", line, i, err)
			}
			cells[i] = v
		}
		key = AppendKey(key[:0], cells)
		if string(key) != row.Key {
			t.Errorf("line %d key:\n got %s\nwant %s", line, key, row.Key)
		}
		val = AppendValue(val[:0], row.Columns, cells)
		if string(val) != row.Value {
			t.Errorf("line %d value:\n got %s\nwant %s", line, val, row.Value)
		}
		var err error
		val, err = NewEncoder(row.Columns).AppendValue(val[:0], cells)
		if err != nil || string(val) != row.Value {
			t.Errorf("line %d Encoder value (err %v):\n got %s\nwant %s", line, err, val, row.Value)
		}
		// The consumer side: SplitKey gives back each rendered cell.
		parts, err := SplitKey(key)
		if err != nil {
			t.Fatalf("line %d SplitKey(%s): %v", line, key, err)
		}
		if len(parts) != len(cells) {
			t.Fatalf("line %d SplitKey: %d parts for %d cells", line, len(parts), len(cells))
		}
		for i, p := range parts {
			if want := AppendCell(nil, cells[i]); string(p) != string(want) {
				t.Errorf("line %d SplitKey part %d = %s, want %s", line, i, p, want)
			}
		}
	})
	if n != 3000 {
		t.Errorf("read %d key vectors, want 3000", n)
	}
}

var (
	castDouble  = regexp.MustCompile(`^CAST\('([^']*)' AS DOUBLE\)$`)
	castMakeTS  = regexp.MustCompile(`^make_timestamp\((-?\d+)\)$`)
	castTSLit   = regexp.MustCompile(`^TIMESTAMP '([^']*)'$`)
	castDate    = regexp.MustCompile(`^\(DATE '([^']*)' \+ (-?\d+)\)$`)
	castDecimal = regexp.MustCompile(`^CAST\('([^']*)' AS DECIMAL\((\d+),(\d+)\)\)$`)
	castBigInt  = regexp.MustCompile(`^CAST\((-?\d+) AS BIGINT\)$`)
	castHugeMul = regexp.MustCompile(`^CAST\((-?\d+) AS HUGEINT\) \* (-?\d+)$`)
)

// parseDuckTimestamp parses DuckDB's timestamp text for years 1..9999.
func parseDuckTimestamp(s string) (int64, error) {
	tm, err := time.Parse("2006-01-02 15:04:05.999999", s)
	if err != nil {
		return 0, err
	}
	return tm.UnixMicro(), nil
}

// castValue builds the Value for one duckdb_cast_text.jsonl input expression.
// It fails on a form it does not know, so a new kind of vector cannot pass
// unchecked.
func castValue(typ, input string) (types.Value, error) {
	switch {
	case typ == "DOUBLE" || typ == "DOUBLE_SPECIAL":
		m := castDouble.FindStringSubmatch(input)
		if m == nil {
			break
		}
		f, err := strconv.ParseFloat(m[1], 64)
		return types.Float(f), err
	case typ == "TIMESTAMP":
		if m := castMakeTS.FindStringSubmatch(input); m != nil {
			us, err := strconv.ParseInt(m[1], 10, 64)
			return types.TS(us), err
		}
		if m := castTSLit.FindStringSubmatch(input); m != nil {
			us, err := parseDuckTimestamp(m[1])
			return types.TS(us), err
		}
	case typ == "DATE":
		m := castDate.FindStringSubmatch(input)
		if m == nil {
			break
		}
		base, err := time.Parse("2006-01-02", m[1])
		if err != nil {
			return types.Value{}, err
		}
		off, err := strconv.ParseInt(m[2], 10, 64)
		return types.DateDays(base.Unix()/86400 + off), err
	case strings.HasPrefix(typ, "DECIMAL"):
		m := castDecimal.FindStringSubmatch(input)
		if m == nil {
			break
		}
		scale, _ := strconv.Atoi(m[3])
		u, err := parseDecimalRounded(m[1], scale, false)
		return types.Dec(u, uint8(scale)), err
	case typ == "BIGINT":
		m := castBigInt.FindStringSubmatch(input)
		if m == nil {
			break
		}
		i, err := strconv.ParseInt(m[1], 10, 64)
		return types.Big(i), err
	case typ == "HUGEINT":
		m := castHugeMul.FindStringSubmatch(input)
		if m == nil {
			break
		}
		a, _ := new(big.Int).SetString(m[1], 10)
		b, _ := new(big.Int).SetString(m[2], 10)
		x, ok := types.Int128FromBig(a.Mul(a, b))
		if !ok {
			return types.Value{}, fmt.Errorf("overflow")
		}
		return types.Huge(x), nil
	case typ == "BOOLEAN":
		switch input {
		case "true":
			return types.Bool(true), nil
		case "false":
			return types.Bool(false), nil
		}
	}
	return types.Value{}, fmt.Errorf("unknown vector form %s %q", typ, input)
}

// TestDuckDBCastText: every line of duckdb_cast_text.jsonl renders as DuckDB
// printed it: numbers and booleans as the JSON text itself, TIMESTAMP and
// DATE as the content of a JSON string, nan/inf/-inf as null.
func TestDuckDBCastText(t *testing.T) {
	counts := map[string]int{}
	n := readJSONL(t, castTextPath, func(line int, raw []byte) {
		var row struct {
			Type  string `json:"type"`
			Input string `json:"input"`
			Text  string `json:"duckdb_text"`
		}
		if err := json.Unmarshal(raw, &row); err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		v, err := castValue(row.Type, row.Input)
		if err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		counts[row.Type]++
		want := row.Text
		switch row.Type {
		case "DOUBLE_SPECIAL":
			want = "null"
		case "TIMESTAMP", "DATE":
			want = `"` + row.Text + `"`
		}
		if got := AppendCell(nil, v); string(got) != want {
			t.Errorf("line %d %s %s: got %s, want %s", line, row.Type, row.Input, got, want)
		}
	})
	if n != 8326 {
		t.Errorf("read %d cast vectors, want 8326", n)
	}
	for _, typ := range []string{"DOUBLE", "DOUBLE_SPECIAL", "TIMESTAMP", "DATE", "BIGINT", "HUGEINT", "BOOLEAN", "DECIMAL(18,3)", "DECIMAL(10,2)", "DECIMAL(38,10)", "DECIMAL(4,0)"} {
		if counts[typ] == 0 {
			t.Errorf("no %s vectors checked", typ)
		}
	}
	t.Logf("checked %v", counts)
}
