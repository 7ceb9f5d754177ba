// Command kafkabench measures ubik's Kafka path against the broker's own
// ceiling on the same events, in one run: a franz-go producer and a
// franz-go consumer that do no processing are the ceiling, a franz-go
// read-process-write loop with transactions and no processing is the
// ceiling for exactly once, and `ubik run --source kafka://... --sink
// kafka://... --until-caught-up` over the same topic (exactly once:
// transactions, read_committed) is the figure. Each repeat runs the
// ceilings and ubik back to back, alternating which goes first, and the
// ratio is taken pair by pair, because these machines are shared and
// noisy. With a private broker (--broker) every figure also has the
// broker's CPU seconds over it: the broker shares the machine's cores.
//
//	go build -o /tmp/ubik ./cmd/ubik && go build -o /tmp/ubik-broker ./cmd/ubik-broker
//	go run ./bench/gen --kind merchant --events 1000000 --groups 10000 --dist zipf --seed 1 > /tmp/ev.jsonl
//	go run ./bench/kafkabench --ubik /tmp/ubik --broker /tmp/ubik-broker --input /tmp/ev.jsonl \
//	    --query bench/queries/std.sql --repeat 3
//
// What is timed:
//
//	produce   franz-go, the events as they are keyed by the GROUP BY column (--key-field), acks=all, idempotent
//	consume   franz-go, read_committed, from the earliest offset to the end, each record's value touched
//	eos       franz-go GroupTransactSession, read_committed, from the earliest offset to the end: one
//	          transaction per 100 ms of polls (ubik's commit interval), each carrying the input offsets
//	          and one record per input partition it read (its last offset); no other processing
//	ubik      the whole process: start, restore, consume, decode, aggregate, the repartition topic unless
//	          --partitioned-by-key (both are run), transactions, the last commit, exit; with
//	          --baseline, the same runs of a second binary, in the same pairs
//
// With --mode fresh it measures end-to-end freshness instead: events
// produced at a steady rate (--rate, --duration), each carrying the wall
// clock when it was produced, through `ubik run --source kafka://...
// --sink kafka://...` (exactly once) on a windowed query that publishes
// max(sent_ms) per group with EMIT EARLY every 100 ms
// (bench/kafkabench/fresh.sql), and a read_committed consumer of the sink
// topic that takes, per record, its arrival time minus that value: p50,
// p99 and max, early records and finals apart, after a warm-up.
//
//	go run ./bench/kafkabench --mode fresh --ubik /tmp/ubik --broker /tmp/ubik-broker --rate 100000 --duration 30s
//
// See bench/README.md ("Kafka: throughput against the broker's ceiling",
// "Kafka: end-to-end freshness").
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
)

type config struct {
	mode                                                          string
	ubik, baseline, broker, brokers, input, query, keyField, work string
	partitions, repeat                                            int
	brokerPID                                                     int // the private broker's, or 0
	fresh                                                         freshConfig
}

// freshConfig is the freshness mode's own flags.
type freshConfig struct {
	rate, groups            int
	duration, warmup, grace time.Duration
	linger                  time.Duration
	byKey                   bool
	ubikProfile             string
}

func main() {
	c := parseFlags()
	var err error
	switch c.mode {
	case "throughput":
		err = runThroughput(c)
	case "fresh":
		err = runFresh(c)
	}
	if err != nil {
		fail(err)
	}
}

func parseFlags() config {
	var c config
	f := &c.fresh
	flag.StringVar(&c.mode, "mode", "throughput", "throughput (against the broker's ceiling) or fresh (end-to-end freshness at a steady rate)")
	flag.StringVar(&c.ubik, "ubik", "", "the ubik binary (required)")
	flag.StringVar(&c.baseline, "baseline", "", "throughput: a second ubik binary to run in the same pairs (new against old)")
	flag.StringVar(&c.broker, "broker", "", "start a private broker from this ubik-broker binary (default: use --brokers)")
	flag.StringVar(&c.brokers, "brokers", "", "Kafka brokers to use when --broker is not given (default $UBIK_KAFKA_BROKERS)")
	flag.StringVar(&c.input, "input", "", "throughput: the events, JSON lines (required; bench/gen --kind merchant)")
	flag.StringVar(&c.query, "query", "", "the query script (default bench/queries/std.sql; fresh: bench/kafkabench/fresh.sql)")
	flag.StringVar(&c.keyField, "key-field", "merchant", "throughput: the GROUP BY column the input topic is keyed by")
	flag.IntVar(&c.partitions, "partitions", 4, "partitions of every topic")
	flag.IntVar(&c.repeat, "repeat", 3, "throughput: pairs per figure; figures are medians")
	flag.StringVar(&c.work, "work", "/tmp/kafkabench", "scratch directory (the private broker's log, ubik's output)")
	flag.IntVar(&f.rate, "rate", 100000, "fresh: events per second, produced at a steady pace")
	flag.DurationVar(&f.duration, "duration", 30*time.Second, "fresh: how long to produce")
	flag.DurationVar(&f.warmup, "warmup", 5*time.Second, "fresh: records arriving this long after the producer starts are counted but left out of the quantiles")
	flag.DurationVar(&f.grace, "grace", 3*time.Second, "fresh: how long to keep reading the sink after the producer stops")
	flag.IntVar(&f.groups, "groups", 4000, "fresh: distinct groups, each event's drawn uniformly")
	flag.DurationVar(&f.linger, "linger", 10*time.Millisecond, "fresh: the producer's linger (franz-go's default is 10ms); counted in the figures")
	flag.BoolVar(&f.byKey, "partitioned-by-key", false, "fresh: run ubik with --partitioned-by-key (the input is keyed by group), else repartitioned")
	flag.StringVar(&f.ubikProfile, "ubik-cpuprofile", "", "fresh: pass --cpuprofile FILE to ubik")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	if err := c.check(); err != nil {
		fail(err)
	}
	return c
}

func (c *config) check() error {
	if c.partitions < 1 {
		return errors.New("--partitions must be at least 1")
	}
	if c.ubik == "" {
		return errors.New("--ubik is required")
	}
	switch c.mode {
	case "throughput":
		if c.query == "" {
			c.query = "bench/queries/std.sql"
		}
		if c.input == "" {
			return errors.New("--input is required with --mode throughput")
		}
		if c.repeat < 1 {
			return errors.New("--repeat must be at least 1")
		}
	case "fresh":
		if c.query == "" {
			c.query = "bench/kafkabench/fresh.sql"
		}
		f := c.fresh
		if f.rate < 1 || f.groups < 1 || f.duration <= 0 || f.warmup < 0 || f.grace < 0 || f.linger < 0 {
			return errors.New("--rate and --groups must be at least 1, --duration positive, --warmup, --grace and --linger not negative")
		}
		if f.warmup >= f.duration {
			return errors.New("--warmup must be shorter than --duration")
		}
	default:
		return fmt.Errorf("--mode %q: throughput or fresh", c.mode)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kafkabench:", err)
	os.Exit(2)
}

// measure is one timed run: wall seconds, the CPU seconds of the process
// that did the work (user + system: a child's rusage, or this process's
// for the franz-go clients), and the private broker's CPU seconds over
// the same span (0 without --broker).
type measure struct{ wall, cpu, broker float64 }
