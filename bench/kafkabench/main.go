// Command kafkabench measures ubik's Kafka path against the broker's own
// ceiling on the same events, in one run: a franz-go producer and a
// franz-go consumer that do no processing are the ceiling, and `ubik run
// --source kafka://... --sink kafka://... --until-caught-up` over the same
// topic (exactly once: transactions, read_committed) is the figure. Each
// repeat runs the ceiling and ubik back to back, alternating which goes
// first, and the ratio is taken pair by pair, because these machines are
// shared and noisy.
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
//	ubik      the whole process: start, restore, consume, decode, aggregate, the repartition topic unless
//	          --partitioned-by-key (both are run), transactions, the last commit, exit
//
// See bench/README.md ("Kafka: throughput against the broker's ceiling").
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type config struct {
	ubik, broker, brokers, input, query, keyField, work string
	partitions, repeat                                  int
}

func main() {
	var c config
	flag.StringVar(&c.ubik, "ubik", "", "the ubik binary (required)")
	flag.StringVar(&c.broker, "broker", "", "start a private broker from this ubik-broker binary (default: use --brokers)")
	flag.StringVar(&c.brokers, "brokers", "", "Kafka brokers to use when --broker is not given (default $UBIK_KAFKA_BROKERS)")
	flag.StringVar(&c.input, "input", "", "the events, JSON lines (required; bench/gen --kind merchant)")
	flag.StringVar(&c.query, "query", "bench/queries/std.sql", "the query script")
	flag.StringVar(&c.keyField, "key-field", "merchant", "the GROUP BY column the input topic is keyed by")
	flag.IntVar(&c.partitions, "partitions", 4, "partitions of every topic")
	flag.IntVar(&c.repeat, "repeat", 3, "pairs per figure; figures are medians")
	flag.StringVar(&c.work, "work", "/tmp/kafkabench", "scratch directory (the private broker's log)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	if c.ubik == "" || c.input == "" {
		fail(errors.New("--ubik and --input are required"))
	}
	if c.repeat < 1 || c.partitions < 1 {
		fail(errors.New("--repeat and --partitions must be at least 1"))
	}
	if err := run(c); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kafkabench:", err)
	os.Exit(2)
}

// measure is one timed run: wall seconds and, for a child process, its CPU
// seconds (user + system, from its rusage).
type measure struct{ wall, cpu float64 }

func run(c config) error {
	ctx := context.Background()
	if err := os.MkdirAll(c.work, 0o755); err != nil {
		return err
	}
	if c.broker != "" {
		addr, stop, err := startBroker(c)
		if err != nil {
			return err
		}
		defer stop()
		c.brokers = addr
	}
	if c.brokers == "" {
		c.brokers = os.Getenv("UBIK_KAFKA_BROKERS")
	}
	if c.brokers == "" {
		return errors.New("no broker: give --broker BINARY or --brokers HOST:PORT (or set UBIK_KAFKA_BROKERS)")
	}
	events, err := readLines(c.input)
	if err != nil {
		return err
	}
	n := len(events)
	fmt.Printf("kafkabench: %d events, %d partitions, brokers %s\n", n, c.partitions, c.brokers)

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)

	// The input topic, keyed the way ubik produce keys it, once: every run
	// reads the same records.
	in := "kb-in-" + run
	if out, err := exec.Command(c.ubik, "produce", "--to", "kafka://"+c.brokers+"/"+in, "--input", c.input,
		"--key-field", c.keyField, "--partitions", strconv.Itoa(c.partitions)).CombinedOutput(); err != nil {
		return fmt.Errorf("ubik produce: %v: %s", err, out)
	}
	keys := make([][]byte, n)
	for i, e := range events {
		keys[i] = fieldText(e, c.keyField)
	}

	var prod, cons, direct, repart []measure
	for r := 0; r < c.repeat; r++ {
		ceiling := func() error {
			topic := fmt.Sprintf("kb-ceiling-%s-%d", run, r)
			if _, err := adm.CreateTopic(ctx, int32(c.partitions), 1, nil, topic); err != nil {
				return err
			}
			m, err := produce(ctx, c.brokers, topic, keys, events)
			if err != nil {
				return fmt.Errorf("ceiling produce: %w", err)
			}
			prod = append(prod, m)
			m, err = consume(ctx, c.brokers, in, n)
			if err != nil {
				return fmt.Errorf("ceiling consume: %w", err)
			}
			cons = append(cons, m)
			return nil
		}
		ubik := func() error {
			for _, byKey := range []bool{true, false} {
				name := fmt.Sprintf("kb_%s_%d_%t", run, r, byKey)
				m, err := runUbik(c, in, name, byKey)
				if err != nil {
					return err
				}
				if byKey {
					direct = append(direct, m)
				} else {
					repart = append(repart, m)
				}
			}
			return nil
		}
		first, second := ceiling, ubik
		if r%2 == 1 {
			first, second = ubik, ceiling
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		fmt.Printf("pair %d: produce %s, consume %s, ubik direct %s, ubik repartitioned %s\n", r+1,
			rate(n, prod[r]), rate(n, cons[r]), rate(n, direct[r]), rate(n, repart[r]))
	}

	fmt.Printf("\n| path | events/s (median of %d) | CPU s | vs consume (pairs) | vs produce (pairs) |\n|---|---:|---:|---|---|\n", c.repeat)
	row := func(what string, ms []measure) {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", what, rate(n, median(ms)), cpuText(ms),
			ratios(ms, cons), ratios(ms, prod))
	}
	row("franz-go producer (ceiling)", prod)
	row("franz-go consumer, read_committed (ceiling)", cons)
	row("ubik run, --partitioned-by-key, exactly once", direct)
	row("ubik run, repartitioned, exactly once", repart)
	return nil
}

// produce sends every event, keyed, to topic and waits for every ack.
func produce(ctx context.Context, brokers, topic string, keys, values [][]byte) (measure, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(1<<16), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return measure{}, err
	}
	defer cl.Close()
	start, cpu0 := time.Now(), selfCPU()
	errc := make(chan error, 1)
	for i := range values {
		cl.Produce(ctx, &kgo.Record{Key: keys[i], Value: values[i]}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return measure{}, err
	}
	select {
	case err := <-errc:
		return measure{}, err
	default:
	}
	return measure{wall: time.Since(start).Seconds(), cpu: selfCPU() - cpu0}, nil
}

// consume reads topic from the start until it has n records.
func consume(ctx context.Context, brokers, topic string, n int) (measure, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return measure{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start, cpu0 := time.Now(), selfCPU()
	got, sum := 0, 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return measure{}, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			sum += len(r.Value)
		})
	}
	if sum == 0 {
		return measure{}, errors.New("read only empty values")
	}
	return measure{wall: time.Since(start).Seconds(), cpu: selfCPU() - cpu0}, nil
}

// runUbik runs the query over the input topic to the end as a fresh query
// name (no committed offsets, no state) and returns its wall and CPU time.
func runUbik(c config, in, name string, byKey bool) (measure, error) {
	script, err := os.ReadFile(c.query)
	if err != nil {
		return measure{}, err
	}
	// A fresh query name for every run: a new consumer group, new internal
	// topics, a new sink topic, so nothing is restored.
	q := filepath.Join(c.work, name+".sql")
	text := renameView(string(script), name)
	if err := os.WriteFile(q, []byte(text), 0o644); err != nil {
		return measure{}, err
	}
	args := []string{"run", q, "--source", "kafka://" + c.brokers + "/" + in,
		"--sink", "kafka://" + c.brokers + "/" + name + "_out", "--until-caught-up", "--no-progress", "--quiet",
		"--instance-id", "kb"}
	if byKey {
		args = append(args, "--partitioned-by-key")
	}
	cmd := exec.Command(c.ubik, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return measure{}, fmt.Errorf("ubik %s: %v: %s", strings.Join(args, " "), err, out.String())
	}
	wall := time.Since(start).Seconds()
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	return measure{wall: wall, cpu: cpu}, nil
}

// renameView gives the script's one view a new name (the Kafka query name
// decides the consumer group and the internal topics).
func renameView(script, name string) string {
	const marker = "CREATE VIEW "
	i := strings.Index(script, marker)
	if i < 0 {
		return script
	}
	rest := script[i+len(marker):]
	j := strings.IndexAny(rest, " \n\t")
	if j < 0 {
		return script
	}
	return script[:i] + marker + name + rest[j:]
}

// fieldText is the top-level string field's characters, as ubik produce
// --key-field keys it for the generator's plain ASCII strings.
func fieldText(line []byte, field string) []byte {
	pat := []byte(`"` + field + `":`)
	i := bytes.Index(line, pat)
	if i < 0 {
		return nil
	}
	rest := line[i+len(pat):]
	for len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0] != '"' {
		return nil
	}
	rest = rest[1:]
	j := slices.Index(rest, '"')
	if j < 0 {
		return nil
	}
	return rest[:j]
}

func readLines(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			lines = append(lines, slices.Clone(sc.Bytes()))
		}
	}
	return lines, sc.Err()
}

func startBroker(c config) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.Create(filepath.Join(c.work, "broker.log"))
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(c.broker, "--port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(30 * time.Second); ; {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return "", nil, fmt.Errorf("broker did not listen on %s: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return addr, func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() }, nil
}

// selfCPU is this process's CPU seconds so far (the ceiling clients run
// in it, one at a time).
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func median(ms []measure) measure {
	s := slices.Clone(ms)
	slices.SortFunc(s, func(a, b measure) int {
		switch {
		case a.wall < b.wall:
			return -1
		case a.wall > b.wall:
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

func rate(n int, m measure) string {
	if m.wall <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fk", float64(n)/m.wall/1000)
}

func cpuText(ms []measure) string {
	m := median(ms)
	if m.cpu == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", m.cpu)
}

// ratios is the median of the pairwise throughput ratios a/b, and each pair.
func ratios(a, b []measure) string {
	rs := make([]float64, len(a))
	parts := make([]string, len(a))
	for i := range a {
		rs[i] = b[i].wall / a[i].wall
		parts[i] = fmt.Sprintf("%.2f", rs[i])
	}
	s := slices.Clone(rs)
	slices.Sort(s)
	return fmt.Sprintf("**%.2f** (%s)", s[len(s)/2], strings.Join(parts, ", "))
}
