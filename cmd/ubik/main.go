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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, cli.StdEnv(), os.Args[1:])
	stop()
	os.Exit(code)
}
