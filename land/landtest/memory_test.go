package landtest

import (
	"testing"

	"github.com/ubiksql/ubik/land"
)

// TestMemory runs the suite on the in-memory oracle itself, which checks the
// suite's own logic (and the land package's rules) without a server.
func TestMemory(t *testing.T) {
	Run(t, Harness{
		Open: func(t testing.TB, mode land.Mode, ns string) land.Lander {
			return sharedMemory(mode, ns)
		},
		ExactValue: true,
	})
}

var memories = map[string]*Memory{}

func sharedMemory(mode land.Mode, ns string) *Memory {
	k := mode.String() + "/" + ns
	if m, ok := memories[k]; ok {
		return m
	}
	m := NewMemory(mode, "")
	memories[k] = m
	return m
}
