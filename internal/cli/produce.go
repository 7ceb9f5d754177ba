package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fastjson"

	"github.com/ubiksql/ubik/kafka"
)

// runProduce writes JSON lines to a Kafka topic, one record per line, for
// examples, end-to-end tests and replays: `ubik produce --to
// kafka://127.0.0.1:9092/events --partitions 4 --key-field customer <
// events.jsonl`. It creates a missing topic (delete policy, not compacted:
// an input topic keeps every event). Lines are sent as they are, malformed
// ones included, so a pipeline's handling of bad input can be exercised.
func runProduce(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	to := fs.String("to", "", "the topic: kafka://HOST:PORT/TOPIC")
	input := fs.String("input", "-", "JSON lines to send (- for stdin)")
	partitions := fs.Int("partitions", 4, "partitions of the topic if it has to be created")
	keyField := fs.String("key-field", "", "use this top-level JSON field's text as the record key (default: no key)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *to == "" {
		return fmt.Errorf("%w: produce needs --to kafka://HOST:PORT/TOPIC", ErrUsage)
	}
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
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(ep.Topic), kgo.MaxBufferedRecords(10000))...)
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
	var p fastjson.Parser
	br := bufio.NewReaderSize(in, 1<<20)
	var sent, keyless int64
	var mu sync.Mutex // the callbacks run on the client's goroutines
	var firstErr error
	for {
		line, tooLong, rerr := readLine(br)
		if len(line) == 0 && rerr != nil {
			if rerr != io.EOF {
				return rerr
			}
			break
		}
		if tooLong {
			return fmt.Errorf("line %d is longer than %d bytes", sent+1, maxLineBytes)
		}
		line = trimCR(line)
		if len(line) == 0 {
			continue
		}
		rec := &kgo.Record{Value: append([]byte(nil), line...)}
		if *keyField != "" {
			if v, err := p.ParseBytes(line); err == nil {
				if k := v.Get(*keyField); k != nil {
					if b, err := k.StringBytes(); err == nil {
						rec.Key = append([]byte(nil), b...)
					} else {
						rec.Key = k.MarshalTo(nil)
					}
				}
			}
			if rec.Key == nil {
				keyless++
			}
		}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
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
	fmt.Fprintf(env.Stderr, "ubik: produced %d records to %s", sent, ep.Topic)
	if keyless > 0 {
		fmt.Fprintf(env.Stderr, " (%d without a %q field, sent without a key)", keyless, *keyField)
	}
	fmt.Fprintln(env.Stderr)
	return nil
}

// pingKafka checks, within a bound, that the brokers answer and accept the
// TLS and SASL settings: a client would otherwise retry a refused login
// until its caller gives up, and a command would seem to hang.
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
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		return fmt.Errorf("cannot reach Kafka at %s (check the address and the TLS and SASL settings): %w", strings.Join(cfg.Brokers, ","), err)
	}
	return nil
}
