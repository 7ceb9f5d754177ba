// Command ubik is the streaming SQL engine's command line. It is a thin main:
// every command lives in internal/cli, which tests drive directly.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/ubiksql/ubik/internal/cli"
)

// gcPercent is the garbage collector's heap goal the command runs with
// unless GOGC is set: 200, where Go's default is 100. Most of a run's
// allocation is short-lived (decoded events, rendered records) over a
// small live heap of open groups, so the default collects very often.
// In same-machine pairs at 200, Nexmark q5 took 5 to 9% less CPU (1M
// and 10M bids) for a larger peak RSS (10M bids: 88 to 102 MB against 58
// to 78); std, q7, q11, q12 and q17 were within noise, 1 to 4 MB larger
// (bench/README.md, "The garbage collector's goal").
const gcPercent = 200

// version is a release build's version, linked in with
// go build -ldflags "-X main.version=v1.2.3" (ubik version prints it). It
// is a variable only because -X sets nothing else; nothing assigns it. A
// binary installed with go install module@version needs none: its build
// info has the module version.
var version string

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	// The first SIGINT or SIGTERM cancels the context with the signal as
	// its cause: the command stops cleanly and prints a "stopped" summary
	// (a file run exits 128 + the signal number, a Kafka run or a land 0;
	// docs/operations.md, "Exit status"). A second one exits at once, 128 + its
	// number.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		cancel(cli.StopSignal{Signal: s})
		s = <-sigs
		os.Exit(cli.StopSignal{Signal: s}.Status())
	}()
	env := cli.StdEnv()
	env.Version = version
	code := cli.Main(ctx, env, os.Args[1:])
	signal.Stop(sigs)
	cancel(nil)
	os.Exit(code)
}
