package exec

import (
	"math"
	"strconv"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// quotedCases are DuckDB 1.5.6's read_json results for a quoted value in a
// column of explicit type ("" is an error), checked against DuckDB itself by
// bench/duckref's TestQuotedNumbersMatchDuckDB. DOUBLE results are printed
// with strconv 'g' -1, DECIMAL results as the unscaled integer.
var quotedCases = []struct {
	typ  string
	json string
	want string
}{
	{"DOUBLE", `"1.5"`, "1.5"}, {"DOUBLE", `" 42"`, "42"}, {"DOUBLE", `"42 "`, ""}, {"DOUBLE", `"1e3"`, "1000"},
	{"DOUBLE", `"NaN"`, "NaN"}, {"DOUBLE", `"nan"`, "NaN"}, {"DOUBLE", `"-nan"`, "NaN"}, {"DOUBLE", `"inf"`, "+Inf"},
	{"DOUBLE", `"-Infinity"`, "-Inf"}, {"DOUBLE", `"INF"`, "+Inf"}, {"DOUBLE", `"+inf"`, ""}, {"DOUBLE", `"+7"`, ""},
	{"DOUBLE", `"0x10"`, ""}, {"DOUBLE", `"1_000"`, ""}, {"DOUBLE", `""`, ""}, {"DOUBLE", `" "`, ""},
	{"DOUBLE", `"-0"`, "-0"}, {"DOUBLE", `"-00"`, "-0"}, {"DOUBLE", `"1e400"`, "+Inf"}, {"DOUBLE", `"1e-400"`, "0"},
	{"DOUBLE", `"00042"`, ""}, {"DOUBLE", `"01.5"`, ""}, {"DOUBLE", `"0.5"`, "0.5"}, {"DOUBLE", `".5"`, "0.5"},
	{"DOUBLE", `"5."`, "5"}, {"DOUBLE", `"-.5"`, "-0.5"}, {"DOUBLE", `"."`, ""}, {"DOUBLE", `"-"`, ""},
	{"DOUBLE", `"1e"`, ""}, {"DOUBLE", `"1.5e"`, ""}, {"DOUBLE", `"1E+3"`, "1000"}, {"DOUBLE", `"1,5"`, ""},
	{"DOUBLE", `"\t7"`, "7"}, {"DOUBLE", `"\u000b42"`, "42"}, {"DOUBLE", `"\u00a042"`, ""}, {"DOUBLE", `"\t7\n"`, ""},
	{"DOUBLE", `"4\u0032"`, "42"}, {"DOUBLE", `"true"`, ""}, {"DOUBLE", `"Infinityx"`, ""},
	{"DOUBLE", `"12345678901234567890123"`, "1.2345678901234568e+22"}, {"DOUBLE", `"0.1000000000000000055511151231257827"`, "0.1"},
	{"BIGINT", `"42"`, "42"}, {"BIGINT", `"-42"`, "-42"}, {"BIGINT", `" 42 "`, "42"}, {"BIGINT", `"\t7\n"`, "7"},
	{"BIGINT", `"1.5"`, ""}, {"BIGINT", `"42.0"`, ""}, {"BIGINT", `"1e3"`, ""}, {"BIGINT", `"NaN"`, ""},
	{"BIGINT", `"+7"`, ""}, {"BIGINT", `"1_000"`, ""}, {"BIGINT", `""`, ""}, {"BIGINT", `"4 2"`, ""},
	{"BIGINT", `"00042"`, ""}, {"BIGINT", `"-00"`, "0"}, {"BIGINT", `"-0"`, "0"}, {"BIGINT", `"0"`, "0"},
	{"BIGINT", `"0x10"`, "16"}, {"BIGINT", `"0X10"`, "16"}, {"BIGINT", `"0b101"`, "5"}, {"BIGINT", `"0B1"`, "1"},
	{"BIGINT", `"-0x10"`, ""}, {"BIGINT", `"0x"`, ""}, {"BIGINT", `"0o7"`, ""}, {"BIGINT", `"0xFFFFFFFF"`, "4294967295"},
	{"BIGINT", `"0x8000000000000000"`, ""}, {"BIGINT", `"9223372036854775807"`, "9223372036854775807"},
	{"BIGINT", `"-9223372036854775808"`, "-9223372036854775808"}, {"BIGINT", `"9223372036854775808"`, ""},
	{"BIGINT", `"9007199254740993"`, "9007199254740993"},
	{"INTEGER", `"2147483647"`, "2147483647"}, {"INTEGER", `"2147483648"`, ""}, {"INTEGER", `"-2147483648"`, "-2147483648"},
	{"INTEGER", `"0x7fffffff"`, "2147483647"}, {"INTEGER", `"0xFFFFFFFF"`, ""}, {"INTEGER", `"1.5"`, ""},
	{"HUGEINT", `"12345678901234567890123"`, "12345678901234567890123"}, {"HUGEINT", `" 42 "`, "42"},
	{"HUGEINT", `"0x10"`, ""}, {"HUGEINT", `"1.5"`, ""}, {"HUGEINT", `"-00"`, "0"}, {"HUGEINT", `"00042"`, ""},
	{"HUGEINT", `"170141183460469231731687303715884105728"`, ""},
	{"DECIMAL(10,3)", `"2.5"`, "2500"}, {"DECIMAL(10,3)", `" 42 "`, "42000"}, {"DECIMAL(10,3)", `"1.5\n"`, "1500"},
	{"DECIMAL(10,3)", `"+7"`, "7000"}, {"DECIMAL(10,3)", `"1.2345"`, "1235"}, {"DECIMAL(10,3)", `"01.5"`, "1500"},
	{"DECIMAL(10,3)", `"1e3"`, "1000000"}, {"DECIMAL(10,3)", `"NaN"`, ""}, {"DECIMAL(10,3)", `"0x10"`, ""},
	{"DECIMAL(10,3)", `""`, ""}, {"DECIMAL(10,3)", `"12345678901"`, ""},
}

func quotedType(t *testing.T, s string) types.Type {
	switch s {
	case "DOUBLE":
		return types.Double
	case "BIGINT":
		return types.BigInt
	case "INTEGER":
		return types.Integer
	case "HUGEINT":
		return types.HugeInt
	case "DECIMAL(10,3)":
		return types.Decimal(10, 3)
	}
	t.Fatalf("no type %s", s)
	return types.Type{}
}

func cellText(v types.Value) string {
	switch v.Kind {
	case types.KindDouble:
		return strconv.FormatFloat(v.F, 'g', -1, 64)
	case types.KindHugeInt, types.KindDecimal:
		return v.Int128().String()
	}
	return strconv.FormatInt(v.I, 10)
}

// TestDecodeQuotedNumbers: a JSON string in a numeric column is cast as
// DuckDB's read_json casts it, by the scanner and the reference decoder
// alike; an uncastable string is a per-event error naming the column.
func TestDecodeQuotedNumbers(t *testing.T) {
	for _, c := range quotedCases {
		src := &plan.Source{Name: "ev", TimeCol: -1, Columns: []plan.Column{{Name: "x", Type: quotedType(t, c.typ)}}}
		for _, noScan := range []bool{false, true} {
			d := NewDecoder(src)
			d.noScan = noScan
			row, err := d.Decode([]byte(`{"x":` + c.json + `}`))
			switch {
			case c.want == "" && err == nil:
				t.Errorf("%s %s (noScan %v): got %s, want an error", c.typ, c.json, noScan, cellText(row[0]))
			case c.want == "":
				if de, ok := err.(*DecodeError); !ok || de.Column != "x" {
					t.Errorf("%s %s: error %v does not name the column", c.typ, c.json, err)
				}
			case err != nil:
				t.Errorf("%s %s (noScan %v): %v, want %s", c.typ, c.json, noScan, err, c.want)
			case cellText(row[0]) != c.want:
				t.Errorf("%s %s (noScan %v): got %s, want %s", c.typ, c.json, noScan, cellText(row[0]), c.want)
			case c.typ == "DOUBLE" && c.want == "-0" && !math.Signbit(row[0].F):
				t.Errorf("%s %s: lost the sign of zero", c.typ, c.json)
			}
		}
	}
}
