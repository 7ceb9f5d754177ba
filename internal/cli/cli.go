// Package cli implements the ubik command line: one file per command
// (run, explain, land, usage, ...). cmd/ubik only calls Main, so every
// command can be tested in process with its own Env.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// Env is what a command may touch of the outside world. Tests build their own.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// IsTerminal reports whether Stderr is an interactive terminal (for the
	// progress bar).
	IsTerminal bool
}

// StdEnv is the process environment.
func StdEnv() *Env {
	fi, err := os.Stderr.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	return &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, IsTerminal: tty}
}

type command struct {
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

// commands is read-only after init: the table of subcommands.
var commands = map[string]command{
	"run":     {"run a query over an input and print its changelog", runRun},
	"produce": {"send JSON lines or CSV records (--format csv) to a Kafka topic (creating it), one record per event", runProduce},
	"infer":   {"print a CREATE SOURCE statement inferred from the first records of a file", runInfer},
	"explain": {"print the plan of a query: key layout, windows, aggregates and their state cost, emit policy", runExplain},
	"land":    {"upsert a changelog into Redis, DynamoDB, Postgres or ClickHouse", runLand},
	"usage":   {"write to and read from the deduplicating usage-event log", runUsage},
}

// ErrUsage marks a command-line usage error (exit status 2).
var ErrUsage = errors.New("ubik: usage")

// Main runs the command in args and returns the process exit status.
func Main(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printHelp(env.Stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "ubik: unknown command %q\n", args[0])
		printHelp(env.Stderr)
		return 2
	}
	if err := c.run(ctx, env, args[1:]); err != nil {
		if errors.Is(err, ErrUsage) {
			fmt.Fprintln(env.Stderr, err)
			return 2
		}
		fmt.Fprintln(env.Stderr, "ubik:", err)
		return 1
	}
	return 0
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "usage: ubik <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
}
