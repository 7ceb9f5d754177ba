package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/kafka"
)

// runProduce writes JSON lines or CSV records to a Kafka topic, one record
// per event, for examples, end-to-end tests and replays: `ubik produce --to
// kafka://127.0.0.1:9092/events --partitions 4 --key-field customer <
// events.jsonl`. It creates a missing topic (delete policy, not compacted:
// an input topic keeps every event). Events are sent as they are, malformed
// ones included, so a pipeline's handling of bad input can be exercised.
// Records without a key go round-robin over the partitions, so every
// partition gets events (an empty one would hold a query's watermark
// back until its idle timeout); --key-field keys them, and a key's
// records share a partition.
// With --format csv an event is a CSV record, which may span lines inside
// quotes (the file source's rule), sent whole without its final line
// break; --header drops the first record (a Kafka CSV source reads fields
// by position) and lets --key-field name a column.
func runProduce(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	setUsage(fs, env, "usage: ubik produce --to kafka://HOST:PORT/TOPIC [--input FILE] [--format jsonl|csv] [flags]\n\nsends one Kafka record per event, creating the topic if it is missing",
		"ubik produce --to kafka://127.0.0.1:9092/events --input examples/events.jsonl --key-field merchant",
		"ubik produce --to kafka://127.0.0.1:9092/orders --input orders.csv --format csv --header",
		"tail -f events.jsonl | ubik produce --to kafka://127.0.0.1:9092/events")
	to := fs.String("to", "", "the topic: kafka://HOST:PORT/TOPIC")
	input := fs.String("input", "-", "the events to send: JSON lines, or CSV records with --format csv (- for stdin)")
	format := fs.String("format", "jsonl", "jsonl (one event per line) or csv (one CSV record per event; a quoted field may span lines)")
	header := fs.Bool("header", false, "csv: the first record is a header row: it names the columns for --key-field and is not sent")
	delimiter := fs.String("delimiter", ",", "csv: the field delimiter (for --key-field)")
	partitions := fs.Int("partitions", 4, "partitions of the topic if it has to be created")
	keyField := fs.String("key-field", "", "use this top-level JSON field's text (csv: this header column's text) as the record key, partitioned by its hash as a Java producer does; the text is the group a query by that column computes (a string's characters, invalid UTF-8 repaired; another value's canonical JSON; null for JSON null and for a line without the field, both the NULL group; only a line that is not JSON goes without a key). Default: no key, records spread round-robin over the partitions")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *to == "" {
		return fmt.Errorf("%w: produce needs --to kafka://HOST:PORT/TOPIC", ErrUsage)
	}
	keys, err := produceKeys(*format, *header, *delimiter, *keyField)
	if err != nil {
		return err
	}
	csvIn := strings.EqualFold(*format, "csv")
	ep, err := kafka.ParseURL(*to, kafka.RoleSink, env.Getenv)
	if err != nil {
		return err
	}
	if err := pingKafka(ctx, ep.Config); err != nil {
		return err
	}
	opts, err := ep.Config.ClientOpts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(ep.Topic), kgo.MaxBufferedRecords(10000),
		kgo.RecordPartitioner(spreadPartitioner()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, int32(*partitions), -1, nil, ep.Topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", ep.Topic, err)
	}
	var in io.Reader = env.Stdin
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	br := bufio.NewReaderSize(in, 1<<20)
	var sent, keyless, lineNo int64
	needHeader := csvIn && *header
	var mu sync.Mutex // the callbacks run on the client's goroutines
	var firstErr error
	perPart := map[int32]int64{}
	for {
		line, n, _, rerr := readRecord(br, csvIn)
		if len(line) == 0 && rerr != nil && !errors.Is(rerr, errTooLong) {
			if rerr != io.EOF {
				return rerr
			}
			break
		}
		lineNo += n
		if errors.Is(rerr, errTooLong) {
			return fmt.Errorf("%s:%d: a record longer than %d bytes", *input, lineNo, maxLineBytes)
		}
		line = trimCR(line)
		if len(line) == 0 {
			continue
		}
		if needHeader {
			needHeader = false
			if keys != nil {
				if err := csvHeaderHasKey(keys, line, *keyField); err != nil {
					return fmt.Errorf("%s:%d: %w", *input, lineNo, err)
				}
			}
			continue
		}
		rec := &kgo.Record{Value: append([]byte(nil), line...)}
		if keys != nil {
			// A string's text; another JSON value's canonical JSON;
			// "null" for NULL (JSON null, or no such field), so the NULL
			// group is on one partition as every other group is.
			rec.Key = keys.Key(line)
		}
		if *keyField != "" && rec.Key == nil {
			keyless++
		}
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				perPart[r.Partition]++
			}
			mu.Unlock()
		})
		sent++
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("produce to %s: %w", ep.Topic, firstErr)
	}
	printProduced(env.Stderr, sent, ep.Topic, keyless, *keyField, perPart)
	return nil
}

// spreadPartitioner partitions a keyed record by Kafka's default rule
// (murmur2 of the key, as a Java producer does, so a key stays on one
// partition) and spreads records without a key round-robin, one record
// per partition in turn: a small batch of events reaches every
// partition, so none of them holds the watermark of a query that reads
// the topic until its idle timeout.
func spreadPartitioner() kgo.Partitioner {
	keyed := kgo.StickyKeyPartitioner(nil)
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		byKey := keyed.ForTopic(topic)
		next := 0 // a topic's partitioner is never called concurrently
		return func(r *kgo.Record, n int) int {
			if r.Key != nil {
				return byKey.Partition(r, n)
			}
			if next >= n {
				next = 0
			}
			p := next
			next++
			return p
		}
	})
}

// pingKafka checks, within a bound, that the brokers answer and accept the
// TLS and SASL settings: a client would otherwise retry a refused login
// until its caller gives up, and a command would seem to hang.
//
// The bound is pingTimeout of the process's own running time: an attempt
// that ran out while the process itself was stopped (SIGSTOP, a paused
// container or VM) or starved for a while is not the brokers' silence, so
// it is tried again, up to pingAttempts times; an attempt the process ran
// through without a stall fails the check.
func pingKafka(ctx context.Context, cfg kafka.Config) error {
	opts, err := cfg.ClientOpts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := retryStalled(ctx, cl.Ping, pingTimeout, pingAttempts, pingStall); err != nil {
		return fmt.Errorf("cannot reach Kafka at %s within %s (check the address and the TLS and SASL settings): %w", strings.Join(cfg.Brokers, ","), pingTimeout, err)
	}
	return nil
}

// retryStalled runs try under a timeout, again (up to attempts in all)
// only when it failed and the process stalled for longer than stall while
// it ran. It returns the attempts made and the last error.
func retryStalled(ctx context.Context, try func(context.Context) error, timeout time.Duration, attempts int, stall time.Duration) (int, error) {
	for attempt := 1; ; attempt++ {
		w := newStallWatch(stall)
		tctx, cancel := context.WithTimeout(ctx, timeout)
		err := try(tctx)
		cancel()
		stalled := w.stop()
		if err == nil || ctx.Err() != nil || !stalled || attempt >= attempts {
			return attempt, err
		}
	}
}

const (
	pingTimeout  = 15 * time.Second
	pingAttempts = 4
	// pingStall is a gap in the process's own ticks that means it was not
	// running (stopped, or starved): far above any scheduling delay.
	pingStall = 2 * time.Second
)

// stallWatch notices whether the process stopped running for longer than
// a bound while it watched: a ticker goroutine records the longest gap
// between its ticks.
type stallWatch struct {
	done   chan struct{}
	result chan bool
}

func newStallWatch(bound time.Duration) *stallWatch {
	w := &stallWatch{done: make(chan struct{}), result: make(chan bool, 1)}
	// The watch starts now, not when its goroutine first runs: on a busy
	// process that may be after the stall.
	begun := time.Now()
	go func() {
		const tick = 100 * time.Millisecond
		t := time.NewTicker(tick)
		defer t.Stop()
		last, stalled := begun, false
		for {
			select {
			case <-w.done:
				w.result <- stalled || time.Since(last) > bound
				return
			case now := <-t.C:
				if now.Sub(last) > bound {
					stalled = true
				}
				last = now
			}
		}
	}()
	return w
}

// stop ends the watch and reports whether a stall was seen.
func (w *stallWatch) stop() bool {
	close(w.done)
	return <-w.result
}

// csvHeaderHasKey reads the header record into keys and checks that it
// names the key column.
func csvHeaderHasKey(keys *kafka.KeyReader, header []byte, key string) error {
	named, err := keys.Header(header)
	if err != nil {
		return fmt.Errorf("CSV header: %w", err)
	}
	if !named {
		return fmt.Errorf("%w: the CSV header has no column %q for --key-field", ErrUsage, key)
	}
	return nil
}

// produceKeys checks the format flags and returns, with --key-field, the
// reader of each record's key (nil without).
func produceKeys(format string, header bool, delimiter, keyField string) (*kafka.KeyReader, error) {
	switch strings.ToLower(format) {
	case "jsonl", "json", "ndjson":
		if header || delimiter != "," {
			return nil, fmt.Errorf("%w: --header and --delimiter are for --format csv", ErrUsage)
		}
		if keyField != "" {
			// A string key is the text a query's VARCHAR column holds
			// (invalid UTF-8 repaired, escapes resolved), and the line
			// is read by the engine's decoder, which takes every number
			// spelling a query takes (NaN, -Infinity, 1e400): a topic
			// keyed this way is partitioned by the group a query keyed
			// by that column computes.
			return kafka.NewKeyReader(keyField, false, ""), nil
		}
	case "csv":
		if _, err := kafka.ParseFormat(map[string]string{"format": "csv", "delimiter": delimiter}); err != nil {
			return nil, fmt.Errorf("%w: --delimiter: %v", ErrUsage, err)
		}
		if keyField != "" {
			if !header {
				return nil, fmt.Errorf("%w: --key-field with --format csv names a header column: add --header", ErrUsage)
			}
			// The key column is read as a CSV file source with a header
			// reads it (fields by name, the same quoting and NULLs).
			return kafka.NewKeyReader(keyField, true, delimiter), nil
		}
	default:
		return nil, fmt.Errorf("%w: --format %q: want jsonl or csv", ErrUsage, format)
	}
	return nil, nil
}

// printProduced says what produce sent: the records, those without a
// key, and the records per partition.
func printProduced(w io.Writer, sent int64, topic string, keyless int64, keyField string, perPart map[int32]int64) {
	fmt.Fprintf(w, "ubik: produced %d records to %s", sent, topic)
	if keyless > 0 {
		fmt.Fprintf(w, " (%d not readable for a %q key, sent without a key)", keyless, keyField)
	}
	if len(perPart) > 0 {
		parts := make([]int32, 0, len(perPart))
		for p := range perPart {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		var b strings.Builder
		for i, p := range parts {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d: %d", p, perPart[p])
		}
		fmt.Fprintf(w, "; per partition %s", b.String())
	}
	fmt.Fprintln(w)
}
