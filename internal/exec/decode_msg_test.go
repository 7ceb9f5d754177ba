package exec

import (
	"strings"
	"testing"
)

// TestDecodeErrorsStayShort: a malformed event's message is an excerpt,
// whatever the size of the event: deeply nested JSON (fastjson reports one
// "cannot parse" per level) and huge values are cut, the reason kept.
func TestDecodeErrorsStayShort(t *testing.T) {
	d := NewDecoder(fuzzSource())
	cases := []struct{ line, want string }{
		{`{"s":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `,"ts":"2026-01-01"}`, "too big depth for the nested JSON"},
		{`{"b":` + strings.Repeat("7", 20000) + `,"ts":"2026-01-01"}`, "expected an integer"},
		{`{"i":"` + strings.Repeat("x", 20000) + `","ts":"2026-01-01"}`, "to INTEGER"},
		{`{"ts":"` + strings.Repeat("2", 20000) + `"}`, "bad timestamp"},
		{`{"s":"a"` + strings.Repeat(" ", 20000) + `x}`, "missing ',' after object value"},
	}
	for _, c := range cases {
		_, err := d.Decode([]byte(c.line))
		if err == nil {
			t.Fatalf("%.40s... decoded", c.line)
		}
		msg := err.Error()
		if len(msg) > 400 || !strings.Contains(msg, c.want) {
			t.Errorf("%.40s...: message of %d bytes, want at most 400 with %q: %.500s", c.line, len(msg), c.want, msg)
		}
	}
	// A short message is untouched.
	_, err := d.Decode([]byte(`{"s":"a","ts":"2026-01-01"`))
	if want := `bad JSON: cannot parse JSON: cannot parse object: unexpected end of object; unparsed tail: ""`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
