// Package cli implements the ubik command line: one file per command
// (run, explain, land, usage, ...). cmd/ubik only calls Main, so every
// command can be tested in process with its own Env.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/ubiksql/ubik"
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
	// Version is the release version the binary was linked with (cmd/ubik's
	// main.version, set by -ldflags -X), or "".
	Version string
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
	"version": {"print the version, VCS revision, Go version and platform of this binary", runVersion},
}

// Exit statuses (docs/operations.md, "Exit status").
const (
	ExitOK       = 0 // the command did what was asked
	ExitError    = 1 // an error: bad SQL, a missing file, a failed write, a store that refused
	ExitUsage    = 2 // a usage error: an unknown flag or command, a missing argument
	ExitBadInput = 3 // ubik run: bad events crossed --max-bad (or every event was bad)
	// A stop by SIGINT or SIGTERM (signalEnd): a service (a Kafka run, a
	// land) exits 0 after its clean shutdown; a command with an end of its
	// own (a file run, --until-caught-up) that the signal cut short exits
	// 128 + the signal number (130, 143), as shells report a process the
	// signal ended.
)

// stopCause is why ctx ended, as an error Main maps to an exit status.
func stopCause(ctx context.Context) error {
	var s StopSignal
	if err := context.Cause(ctx); errors.As(err, &s) {
		return s
	}
	return fmt.Errorf("stopped: %w", ctx.Err())
}

// signalEnd is what a command stopped by a signal, after its clean
// shutdown, returns. A service (service: a Kafka run or a land without
// --until-caught-up) has no end of its own: a signal is its normal stop,
// as under systemd or in Kafka Streams, so it succeeds (exit 0). A command
// with an end (a file run, --until-caught-up) did not reach it: the stop,
// exit 128 + the signal number, so that `cmd && next` does not go on.
func signalEnd(ctx context.Context, service bool) error {
	if service {
		return nil
	}
	return stopCause(ctx)
}

// Main runs the command in args and returns the process exit status.
func Main(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 {
		printHelp(env.Stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		printHelp(env.Stdout)
		return ExitOK
	case "help":
		if len(args) == 1 {
			printHelp(env.Stdout)
			return ExitOK
		}
		if _, ok := commands[args[1]]; !ok {
			fmt.Fprintf(env.Stderr, "ubik: help: unknown command %q%s\n", args[1], suggestCommand(args[1]))
			printHelp(env.Stderr)
			return ExitUsage
		}
		args = []string{args[1], "--help"}
	case "-version", "--version":
		args = []string{"version"}
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "ubik: unknown command %q%s\n", args[0], suggestCommand(args[0]))
		printHelp(env.Stderr)
		return ExitUsage
	}
	err := c.run(ctx, env, args[1:])
	var stop StopSignal
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errHelp):
		return ExitOK
	case errors.As(err, &stop):
		return stop.Status()
	}
	// An error can quote a statement or a URL: never with its password.
	fmt.Fprintln(env.Stderr, "ubik:", cleanMessage(ubik.RedactSecrets(err.Error())))
	switch {
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrBadInput):
		return ExitBadInput
	}
	return ExitError
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
	fmt.Fprint(w, `
"ubik help COMMAND" or "ubik COMMAND --help" shows a command's flags.

examples:
  ubik run examples/merchant_totals.sql --input examples/events.jsonl
  ubik explain examples/merchant_totals.sql
  ubik infer events.jsonl --name events
`)
}

// setUsage makes fs print its help on stdout (ubik CMD --help): the usage
// line, the flags and a few examples. Parse errors are reported by
// parseFlags, never by the flag package.
func setUsage(fs *flag.FlagSet, env *Env, usage string, examples ...string) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := env.Stdout
		fmt.Fprintln(w, usage)
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if len(examples) > 0 {
			fmt.Fprintln(w, "\nexamples:")
			for _, e := range examples {
				fmt.Fprintln(w, "  "+e)
			}
		}
	}
}

// parseFlags parses args into fs (set up by setUsage): -h/--help prints the
// help and returns errHelp; a bad flag is a usage error naming it.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {} // the flag package calls it on any error
	err := fs.Parse(args)
	fs.Usage = usage
	if err == nil {
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return errHelp
	}
	return fmt.Errorf("%w: %v%s (ubik %s --help lists the flags)", ErrUsage, err, suggestFlag(fs, err), strings.Fields(fs.Name())[len(strings.Fields(fs.Name()))-1])
}

// suggestCommand returns ` (did you mean "run"?)` for a mistyped command
// close to one of ubik's, or "".
func suggestCommand(name string) string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names) // a tie goes to the same name every time
	return suggest(name, names)
}

// suggestFlag returns ` (did you mean "--input"?)` when err is the flag
// package's unknown flag and the flag is close to one of fs's, or "".
func suggestFlag(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
	return suggest("--"+strings.TrimLeft(name, "-"), names)
}

// redactWriter removes secrets (ubik.RedactSecrets) from what it writes: a log
// line can quote a broker list or an option. A slog handler writes one
// record per call, so a secret is never split across calls.
type redactWriter struct{ w io.Writer }

func (r redactWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, ubik.RedactSecrets(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// cleanMessage drops Go package prefixes ("types: ", "exec: ", "ubik: ")
// from an error's text: the command line names the problem, not the
// package that found it.
func cleanMessage(s string) string {
	for _, p := range []string{"ubik", "types", "exec", "plan", "parser", "changelog", "kafka", "kafkasrc", "redislander", "pglander", "chlander", "dynamolander", "pgusage", "chusage"} {
		p += ": "
		for strings.HasPrefix(s, p) {
			s = s[len(p):]
		}
		s = strings.ReplaceAll(s, ": "+p, ": ")
	}
	return s
}

func runVersion(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	setUsage(fs, env, "usage: ubik version (or ubik --version)\n\nprints the version of this binary (the release version linked in with -ldflags \"-X main.version=VERSION\", else the module version), the VCS revision and time when built in a git checkout, the Go version and the platform",
		"ubik version", "ubik --version")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: version takes no arguments", ErrUsage)
	}
	bi, ok := debug.ReadBuildInfo()
	_, err := fmt.Fprintln(env.Stdout, versionOf(env.Version, bi, ok))
	return err
}

// versionOf describes the binary: its version, then the VCS revision and
// time if go build stamped them, the Go version and the platform. The
// version is the one linked in (-ldflags -X main.version=...) if any, else
// the module version in the build info (go install module@version sets
// it; go build in a git checkout stamps a pseudo-version), else (devel).
func versionOf(linked string, bi *debug.BuildInfo, ok bool) string {
	var b strings.Builder
	v := linked
	if v == "" && ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(&b, "ubik %s", v)
	settings := map[string]string{}
	if ok {
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	if r := settings["vcs.revision"]; r != "" {
		fmt.Fprintf(&b, " revision %s", r)
		if settings["vcs.modified"] == "true" {
			b.WriteString(" (modified)")
		}
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " committed %s", t)
		}
	}
	goVersion := runtime.Version()
	if ok {
		goVersion = bi.GoVersion
	}
	fmt.Fprintf(&b, " %s %s/%s", goVersion, runtime.GOOS, runtime.GOARCH)
	if v == "(devel)" && settings["vcs.revision"] == "" {
		b.WriteString(" (no version: built outside a git checkout or with -buildvcs=false, and without -ldflags -X main.version=VERSION)")
	}
	return b.String()
}

// onePositional returns the command's one positional argument: first (it
// came before the flags) or the one left after them. Any other argument is
// a usage error, never ignored.
func onePositional(fs *flag.FlagSet, first string) (string, error) {
	rest := fs.Args()
	if first == "" && len(rest) > 0 {
		first, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("%w: unexpected argument %q (flags come before or after the file; ubik %s --help lists them)", ErrUsage, rest[0], fs.Name())
	}
	return first, nil
}
