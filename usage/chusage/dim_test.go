package chusage

import (
	"testing"

	"github.com/ubiksql/ubik/usage"
)

func TestDimEncodingRoundTrip(t *testing.T) {
	vals := []usage.Value{usage.Null(), usage.Bool(true), usage.Bool(false), usage.Number(5), usage.Number(-0.25), usage.Number(1e21),
		usage.String(""), usage.String("5"), usage.String("true"), usage.String("a\x01b"), usage.String("null")}
	seen := map[string]int{}
	for _, name := range []string{"d", "with space", "ü"} {
		for i, v := range vals {
			enc := encodeDim(name, v)
			n, got, err := decodeDim(enc)
			if err != nil || n != name || !got.Equal(v) {
				t.Fatalf("%q=%v encodes to %q, decodes to %q=%v (%v)", name, v, enc, n, got, err)
			}
			if j, dup := seen[enc]; dup && j != i {
				t.Fatalf("%v and %v share the encoding %q", vals[j], v, enc)
			}
			seen[enc] = i
		}
	}
}
