package redislander

import (
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// BenchmarkLand: go test -bench Land -benchtime=1000000x ./land/redislander
// (1M records over 100k keys). Compare with the server's own ceiling:
// redis-benchmark -q -P 64 -n 1000000 -r 100000 -t hset.
func BenchmarkLand(b *testing.B) {
	c := client(b, testenv.RequireRedis(b))
	l := openOn(b, c, land.Latest, landtest.NS("bench"))
	landtest.BenchLand(b, l, 100_000, 5000)
}
