package metamorphic

import (
	"math/rand/v2"
	"testing"
)

func TestInProcessQuick(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		c := Generate(seed, Size{Events: 400})
		ref, want, err := Reference(c)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, c.SQL)
		}
		if ref.Malformed != 0 {
			t.Errorf("seed %d: %d malformed", seed, ref.Malformed)
		}
		r := rand.New(rand.NewPCG(seed, 1))
		for _, cfg := range Configs(r, len(c.Lines)) {
			got, err := RunInProcess(c, cfg)
			if err == nil {
				err = Compare(c, ref, want, got)
			}
			if err != nil {
				t.Fatalf("seed %d: %v\n%s", seed, err, c.SQL)
			}
		}
		t.Logf("seed %d: %d lines, %d records, %d finals, %d dups %s", seed, len(c.Lines), len(ref.Recs), len(want), ref.Duplicates, c.Query.Window)
	}
}
