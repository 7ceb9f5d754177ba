package exec

import (
	"encoding/json"
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

const numTS = `"ts":"2026-07-18 10:00:00"`

// Unquoted numbers that are not JSON are malformed, in a column of any
// numeric type, in a field no column reads and nested in a JSON column, on
// both decoding paths, as their quoted forms are refused.
func TestUnquotedNonJSONNumbersMalformed(t *testing.T) {
	src := fuzzSource()
	src.Columns = append(src.Columns, plan.Column{Name: "j", Type: types.Varchar, JSON: true})
	scan, ref := NewDecoder(fuzzSource()), NewDecoder(src)
	for _, tok := range []string{"007", "00.5", "01", "+1", "-.5", "5.", ".5", "-01", "1.e5", "+0"} {
		for _, col := range []string{"d", "i", "b", "h", "m", "unread"} {
			line := `{` + numTS + `,"` + col + `":` + tok + `}`
			for name, d := range map[string]*Decoder{"scanner": scan, "reference": ref} {
				_, err := d.Decode([]byte(line))
				if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "not a JSON number") {
					t.Errorf("%s: %s: got %v, want a malformed event naming the number", name, line, err)
				}
			}
		}
		line := `{` + numTS + `,"j":{"a":[1,` + tok + `]}}`
		if _, err := ref.Decode([]byte(line)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want malformed", line, err)
		}
	}
	_, err := ref.Decode([]byte(`{` + numTS + `,"d":007}`))
	if want := `bad JSON: 007 at byte 32 is not a JSON number: a JSON number has no leading zero before another digit`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	for _, tok := range []string{"0", "-0", "7", "0.5", "-0.5", "5e3", "5E-3", "1.5e+2", "NaN", "-Infinity", "inf"} {
		line := `{` + numTS + `,"d":` + tok + `,"unread":[` + tok + `]}`
		for name, d := range map[string]*Decoder{"scanner": scan, "reference": ref} {
			if _, err := d.Decode([]byte(line)); err != nil {
				t.Errorf("%s: %s: %v", name, line, err)
			}
		}
	}
}

// checkNumberToken: a token made of number characters is read as a number
// exactly when encoding/json finds it valid (or it is one of the
// non-finite words the decoder reads on purpose), in a DOUBLE column and
// in a skipped field, on both paths.
func checkNumberToken(t *testing.T, scan, ref *Decoder, tok string) {
	t.Helper()
	tok = strings.TrimSpace(tok)
	if tok == "" || strings.Trim(tok, "0123456789.+-eE") != "" {
		return
	}
	valid := json.Valid([]byte(tok))
	for _, line := range []string{`{` + numTS + `,"d":` + tok + `}`, `{` + numTS + `,"unread":` + tok + `}`} {
		for name, d := range map[string]*Decoder{"scanner": scan, "reference": ref} {
			_, err := d.Decode([]byte(line))
			if (err == nil) != valid {
				t.Fatalf("%s: %s: json.Valid %v, decoder error %v", name, line, valid, err)
			}
		}
	}
}

func numberDecoders() (*Decoder, *Decoder) {
	scan, ref := NewDecoder(fuzzSource()), NewDecoder(fuzzSource())
	ref.noScan = true
	return scan, ref
}

// FuzzJSONNumber: the decoders' number grammar is encoding/json's.
func FuzzJSONNumber(f *testing.F) {
	for _, s := range []string{"007", "00.5", "01", "+1", "-.5", "5.", "0", "-0", "1e5", "1E+5", "1e", "-", "1.5e-3", "--1", "1-2", "0e0", "1.0.0"} {
		f.Add(s)
	}
	scan, ref := numberDecoders()
	f.Fuzz(func(t *testing.T, tok string) { checkNumberToken(t, scan, ref, tok) })
}

// TestJSONNumberGenerated runs the property over generated tokens on every
// test run (the fuzz target's seeds are few).
func TestJSONNumberGenerated(t *testing.T) {
	scan, ref := numberDecoders()
	rng := rand.New(rand.NewSource(1))
	const alphabet = "0123456789.+-eE"
	parts := []string{"0", "1", "9", "00", "-", "+", ".", "e", "E", "e+", "e-", "12", "007"}
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		for k := 1 + rng.Intn(6); k > 0; k-- {
			if rng.Intn(2) == 0 {
				b.WriteByte(alphabet[rng.Intn(len(alphabet))])
			} else {
				b.WriteString(parts[rng.Intn(len(parts))])
			}
		}
		checkNumberToken(t, scan, ref, b.String())
	}
}
