package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ubiksql/ubik/internal/testenv"
)

// ubikBin is the ubik binary of this test binary's run: the tests that
// run it as a process (kill -9, signals, the README's commands) share one
// build, which took seconds each (go build links the whole command).
var ubikBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if ubikBin.dir != "" {
		os.RemoveAll(ubikBin.dir)
	}
	os.Exit(code)
}

// buildUbik compiles the ubik binary once per test binary run.
func buildUbik(t *testing.T) string {
	t.Helper()
	work := testenv.GoWork(t) // cmd/ubik is its own module
	ubikBin.once.Do(func() {
		if ubikBin.dir, ubikBin.err = os.MkdirTemp("", "ubik-cli-test-"); ubikBin.err != nil {
			return
		}
		bin := filepath.Join(ubikBin.dir, "ubik")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/ubiksql/ubik/cmd/ubik")
		cmd.Env = append(os.Environ(), "GOWORK="+work)
		if out, err := cmd.CombinedOutput(); err != nil {
			ubikBin.err = &buildError{err, out}
			return
		}
		ubikBin.path = bin
	})
	if ubikBin.err != nil {
		t.Fatalf("go build: %v", ubikBin.err)
	}
	return ubikBin.path
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }
