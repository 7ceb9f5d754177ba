package chlander

import (
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// BenchmarkLand: go test -bench . -benchtime=1000000x ./land/chlander.
// Guarded: a read of the batch's versions, then the append.
func BenchmarkLand(b *testing.B) {
	landtest.BenchLand(b, open(b, land.Latest, landtest.NS("bench"), false), 100_000, 20000)
}

// BenchmarkAppendOnly is the store's own ceiling: the same inserts with
// no read before them.
func BenchmarkAppendOnly(b *testing.B) {
	testenv.RequireClickHouse(b)
	landtest.BenchLand(b, open(b, land.Latest, landtest.NS("bench"), true), 100_000, 20000)
}
