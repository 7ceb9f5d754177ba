// Command gen writes a deterministic benchmark workload as JSON lines: the
// merchant events of the standard query, or one of Nexmark's bid, person
// and auction streams.
//
// The same flags and seed always produce the same bytes, so a benchmark file
// can be regenerated instead of shipped. See bench/README.md for the time
// model (1 ms per event, bounded disorder, re-sent duplicates).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", string(cfg.Kind), "workload: merchant (the standard query's events), or Nexmark's bids, person or auction stream")
	fs.Int64Var(&cfg.Events, "events", cfg.Events, "number of lines to write, re-sent duplicates included")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed; the same seed and flags give the same bytes")
	fs.IntVar(&cfg.Groups, "groups", cfg.Groups, "distinct keys: merchants (merchant), auctions and bidders (bids); how far back a seller (auction) or a moving person (person) is drawn among the persons created")
	dist := fs.String("dist", string(cfg.Dist), "key distribution: zipf or uniform")
	fs.Float64Var(&cfg.ZipfS, "zipf-s", cfg.ZipfS, "Zipf exponent s (> 1): P(key k) ~ (k+1)^-s")
	fs.DurationVar(&cfg.Disorder, "disorder", cfg.Disorder, "bound on how far an event's time may trail the largest time already written")
	fs.Float64Var(&cfg.LateFrac, "late-frac", cfg.LateFrac, "fraction of events that are delayed (by up to --disorder)")
	fs.Float64Var(&cfg.DupRate, "dup-rate", cfg.DupRate, "probability that an event is re-sent once, later in the stream (not person: a version is never re-sent)")
	fs.Float64Var(&cfg.UpdateRate, "update-rate", cfg.UpdateRate, "person: probability that a creation is followed by a new version (city, state) of an older person")
	start := fs.String("start", "2026-07-18 10:00:00", "event time of the first event (UTC, 'YYYY-MM-DD HH:MM:SS')")
	out := fs.String("out", "", "output file (default stdout); written to FILE.tmp and renamed when complete")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.Kind = Kind(*kind)
	cfg.Dist = Dist(*dist)
	t, err := time.Parse("2006-01-02 15:04:05", *start)
	if err != nil {
		return fmt.Errorf("--start %q: want 'YYYY-MM-DD HH:MM:SS': %w", *start, err)
	}
	cfg.Start = t
	if err := cfg.Validate(); err != nil {
		return err
	}
	if *out == "" {
		bw := bufio.NewWriterSize(stdout, 1<<20)
		if _, err := Generate(bw, cfg); err != nil {
			return err
		}
		return bw.Flush()
	}
	return writeFile(*out, cfg)
}

// writeFile generates into path.tmp and renames it, so an interrupted run
// never leaves a truncated file that a cache would take for a complete one.
func writeFile(path string, cfg Config) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	_, err = Generate(bw, cfg)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
