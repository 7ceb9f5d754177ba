// Command ubik is the streaming SQL engine's command line. It is a thin main:
// every command lives in internal/cli, which tests drive directly.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ubiksql/ubik/internal/cli"
)

func main() {
	// The first SIGINT or SIGTERM cancels the context with the signal as
	// its cause: a file run checkpoints, prints a "stopped" summary and
	// exits 128 + the signal number. A second one exits at once.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		cancel(cli.StopSignal{Signal: s})
		s = <-sigs
		os.Exit(cli.StopSignal{Signal: s}.Status())
	}()
	code := cli.Main(ctx, cli.StdEnv(), os.Args[1:])
	signal.Stop(sigs)
	cancel(nil)
	os.Exit(code)
}
