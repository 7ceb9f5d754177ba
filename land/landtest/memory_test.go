package landtest

import (
	"sync"
	"testing"

	"github.com/ubiksql/ubik/land"
)

// TestMemory runs the suite on the in-memory oracle itself, which checks the
// suite's own logic (and the land package's rules) without a server.
func TestMemory(t *testing.T) {
	var mu sync.Mutex
	stores := map[string]*Memory{} // one store per namespace, shared by its landers
	Run(t, Harness{
		Open: func(t testing.TB, mode land.Mode, ns string) land.Lander {
			mu.Lock()
			defer mu.Unlock()
			k := mode.String() + "/" + ns
			if stores[k] == nil {
				stores[k] = NewMemory(mode, "")
			}
			return stores[k]
		},
		ExactValue: true,
	})
}
