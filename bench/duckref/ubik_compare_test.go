package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// These tests run a sample of ubik's functions and DuckDB over the same
// rows and require the same answers.

func openDuck(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// ubikFinal runs one query over the JSON lines and returns the last value
// of every key, decoded with numbers kept as text.
func ubikFinal(t *testing.T, script string, lines []string) map[string]map[string]json.RawMessage {
	t.Helper()
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	last := map[string][]byte{}
	q, err := eng.Start(script, ubik.QueryOptions{OnRecord: func(r changelog.Record) error {
		last[string(r.Key)] = bytes.Clone(r.Value)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if err := q.Push([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Malformed != 0 || st.EvalErrors != 0 {
		t.Fatalf("ubik rejected rows: %+v", st)
	}
	out := map[string]map[string]json.RawMessage{}
	for k, v := range last {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatal(err)
		}
		out[k] = m
	}
	return out
}

func writeLines(t *testing.T, lines []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAvgMatchesDuckDB: avg of BIGINT and DECIMAL over groups of large
// values, where rounding the sum before dividing misses by an ulp. ubik's
// avg is the exact mean rounded once; it must equal DuckDB's wherever
// DuckDB's is that too (DuckDB divides a DECIMAL sum in floating point, so
// over wide decimals it misses now and then: those are counted, not
// failed).
func TestAvgMatchesDuckDB(t *testing.T) {
	r := rand.New(rand.NewPCG(20261201, 7))
	type group struct {
		sumI, sumD *big.Int
		n          int64
	}
	exact := map[string]*group{}
	var lines []string
	add := func(g string, i int64, d int64) {
		lines = append(lines, fmt.Sprintf(`{"g":"%s","i":%d,"d":%d.%03d}`, g, i, d/1000, d%1000))
		e := exact[g]
		if e == nil {
			e = &group{sumI: new(big.Int), sumD: new(big.Int)}
			exact[g] = e
		}
		e.sumI.Add(e.sumI, big.NewInt(i))
		e.sumD.Add(e.sumD, big.NewInt(d))
		e.n++
	}
	add("issue", 9060515353853806102, 1)
	add("issue", 9140615107960319628, 1)
	add("issue", 9112354741735175090, 21)
	for g := 0; g < 300; g++ {
		for k := 2 + r.IntN(5); k > 0; k-- {
			i := int64(r.Uint64() >> 1)
			if r.IntN(2) == 0 {
				i = -i
			}
			add(fmt.Sprintf("g%d", g), i, r.Int64N(1_000_000_000_000_000_000))
		}
	}
	got := ubikFinal(t, `CREATE SOURCE ev (g VARCHAR, i BIGINT, d DECIMAL(18,3)) WITH (format = 'jsonl');
		SELECT g, avg(i) AS ai, avg(d) AS ad FROM ev GROUP BY g`, lines)
	db := openDuck(t)
	rows, err := db.Query(fmt.Sprintf(`SELECT g, avg(i), avg(d) FROM read_json('%s', columns={g: 'VARCHAR', i: 'BIGINT', d: 'DECIMAL(18,3)'},
		format='newline_delimited') GROUP BY g`, writeLines(t, lines)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n, duckMisses := 0, map[string]int{}
	for rows.Next() {
		var g string
		var ai, ad float64
		if err := rows.Scan(&g, &ai, &ad); err != nil {
			t.Fatal(err)
		}
		n++
		u, e := got[`["`+g+`"]`], exact[g]
		for _, c := range []struct {
			col   string
			duck  float64
			exact *big.Rat
		}{
			{"ai", ai, new(big.Rat).SetFrac(e.sumI, big.NewInt(e.n))},
			{"ad", ad, new(big.Rat).SetFrac(e.sumD, big.NewInt(e.n*1000))},
		} {
			want, _ := c.exact.Float64()
			f, err := strconv.ParseFloat(string(u[c.col]), 64)
			switch {
			case err != nil || f != want:
				t.Errorf("group %s: ubik %s = %s, the exact mean rounds to %v", g, c.col, u[c.col], want)
			case c.duck != want && g == "issue":
				t.Errorf("group %s: DuckDB %s = %v, the exact mean rounds to %v", g, c.col, c.duck, want)
			case c.duck != want:
				duckMisses[c.col]++
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(got) || n != 301 {
		t.Fatalf("DuckDB %d groups, ubik %d", n, len(got))
	}
	if duckMisses["ai"] != 0 {
		t.Errorf("DuckDB's avg(BIGINT) missed the exact mean in %d groups", duckMisses["ai"])
	}
	t.Logf("DuckDB's avg(DECIMAL(18,3)) differs from the exact mean rounded once in %d of %d groups", duckMisses["ad"], n)
}

// TestCaseMapMatchesDuckDBOnStrings: upper and lower of mixed strings
// through ubik's query path.
func TestCaseMapMatchesDuckDBOnStrings(t *testing.T) {
	words := []string{"straße", "ǅemal", "İstanbul", "ΣΊΣΥΦΟΣ", "ﬁne", "ŉ", "Ǳ ǲ ǳ", "ΐ", "ꭰ", "𐐨𐐀", "ǰ", "ẞ", "K", "Å", "mixed ASCII and Ωmega", "ᾳ ᾼ", "ſ", "ι"}
	var lines []string
	for i, w := range words {
		b, _ := json.Marshal(w)
		lines = append(lines, fmt.Sprintf(`{"k":%d,"s":%s}`, i, b))
	}
	got := ubikFinal(t, `CREATE SOURCE ev (k BIGINT, s VARCHAR) WITH (format = 'jsonl');
		SELECT k, max(upper(s)) AS u, max(lower(s)) AS l FROM ev GROUP BY k`, lines)
	db := openDuck(t)
	for i, w := range words {
		var u, l string
		if err := db.QueryRow(`SELECT upper(?), lower(?)`, w, w).Scan(&u, &l); err != nil {
			t.Fatal(err)
		}
		v := got["["+strconv.Itoa(i)+"]"]
		var gu, gl string
		json.Unmarshal(v["u"], &gu)
		json.Unmarshal(v["l"], &gl)
		if gu != u || gl != l {
			t.Errorf("%q: ubik upper %q lower %q, DuckDB %q %q", w, gu, gl, u, l)
		}
	}
}

// TestQuotedNumbersMatchDuckDB: a JSON string in a numeric column casts in
// ubik's decoder exactly when DuckDB's read_json (explicit columns) casts
// it, to the same value.
func TestQuotedNumbersMatchDuckDB(t *testing.T) {
	vals := []string{`"1.5"`, `" 42"`, `"42 "`, `" 42 "`, `"\t7"`, `"\t7\n"`, `"1e3"`, `"1E+3"`, `"NaN"`, `"nan"`, `"-nan"`, `"inf"`, `"-Infinity"`,
		`"INF"`, `"+inf"`, `"+7"`, `"0x10"`, `"0X1f"`, `"-0x10"`, `"0b101"`, `"0o7"`, `"0x"`, `"1_000"`, `""`, `" "`, `"-0"`, `"-00"`, `"0"`,
		`"00042"`, `"01.5"`, `"-01.5"`, `".5"`, `"5."`, `"-.5"`, `"."`, `"-"`, `"1e"`, `"1.5e"`, `"e3"`, `"1,5"`, `"4 2"`, `"true"`,
		`"4\u0032"`, `"\u00a042"`, `"\u000b42"`, `"１"`, `"42"`, `"-42"`, `"42.0"`, `"1.2345"`, `"12.0000"`, `"1e400"`, `"1e-400"`, `"1e-2"`,
		`"2147483647"`, `"2147483648"`, `"-2147483648"`, `"0x7fffffff"`, `"0xFFFFFFFF"`, `"9223372036854775807"`, `"9223372036854775808"`,
		`"-9223372036854775808"`, `"0x8000000000000000"`, `"9007199254740993"`, `"12345678901234567890123"`,
		`"170141183460469231731687303715884105727"`, `"170141183460469231731687303715884105728"`, `"0.1000000000000000055511151231257827"`,
		`"1.0000000000000000001"`, `"2.5e0"`, `"Infinityx"`}
	// DuckDB also accepts '_' between the digits of a DECIMAL; ubik does not
	// (docs/numbers.md).
	known := map[string]bool{`DECIMAL(10,3) "1_000"`: true}
	typs := map[string]types.Type{"DOUBLE": types.Double, "BIGINT": types.BigInt, "INTEGER": types.Integer, "HUGEINT": types.HugeInt, "DECIMAL(10,3)": types.Decimal(10, 3)}
	db := openDuck(t)
	dir := t.TempDir()
	agree := 0
	for name, typ := range typs {
		dec := exec.NewDecoder(&plan.Source{Name: "ev", TimeCol: -1, Columns: []plan.Column{{Name: "x", Type: typ}}})
		for vi, v := range vals {
			line := `{"x":` + v + `}`
			p := filepath.Join(dir, fmt.Sprintf("%s-%d.json", strings.NewReplacer("(", "", ")", "", ",", "").Replace(name), vi))
			if err := os.WriteFile(p, []byte(line+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var duck sql.NullString
			derr := db.QueryRow(fmt.Sprintf(`SELECT x::VARCHAR FROM read_json('%s', columns={x: '%s'}, format='newline_delimited')`, p, name)).Scan(&duck)
			row, uerr := dec.Decode([]byte(line))
			switch {
			case known[name+" "+v]:
				if derr != nil || uerr == nil {
					t.Errorf("%s %s: no longer the known difference (DuckDB %v, ubik %v)", name, v, derr, uerr)
				}
				agree++
			case derr != nil && uerr != nil:
				agree++
			case derr != nil:
				t.Errorf("%s %s: ubik casts it, DuckDB: %.100v", name, v, derr)
			case uerr != nil:
				t.Errorf("%s %s: DuckDB casts it to %s, ubik: %v", name, v, duck.String, uerr)
			case !sameNumber(row[0], duck.String):
				t.Errorf("%s %s: ubik %+v, DuckDB %s", name, v, row[0], duck.String)
			default:
				agree++
			}
		}
	}
	if agree != len(vals)*len(typs) {
		t.Errorf("%d of %d agree", agree, len(vals)*len(typs))
	}
}

// sameNumber compares ubik's cell with DuckDB's VARCHAR rendering.
func sameNumber(v types.Value, duck string) bool {
	switch v.Kind {
	case types.KindDouble:
		switch duck {
		case "nan", "-nan":
			return math.IsNaN(v.F)
		case "inf":
			return math.IsInf(v.F, 1)
		case "-inf":
			return math.IsInf(v.F, -1)
		}
		f, err := strconv.ParseFloat(duck, 64)
		return err == nil && math.Float64bits(f) == math.Float64bits(v.F)
	case types.KindDecimal:
		want, ok := new(big.Rat).SetString(duck)
		got := new(big.Rat).SetFrac(v.Int128().Big(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(v.Scale)), nil))
		return ok && want.Cmp(got) == 0
	case types.KindHugeInt:
		return v.Int128().String() == duck
	}
	return strconv.FormatInt(v.I, 10) == duck
}
