package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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

// runThroughput is the throughput mode: the ceilings and ubik over the
// same input topic, pair by pair.
func runThroughput(c config) error {
	ctx := context.Background()
	stop, err := connect(&c)
	if err != nil {
		return err
	}
	defer stop()
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

	var prod, cons, eos, direct, repart, baseDirect, baseRepart []measure
	for r := 0; r < c.repeat; r++ {
		ceiling := func() error {
			topic := fmt.Sprintf("kb-ceiling-%s-%d", run, r)
			if _, err := adm.CreateTopic(ctx, int32(c.partitions), 1, nil, topic); err != nil {
				return err
			}
			b0 := brokerCPU(c.brokerPID)
			m, err := produce(ctx, c.brokers, topic, keys, events)
			m.broker = brokerCPU(c.brokerPID) - b0
			if err != nil {
				return fmt.Errorf("ceiling produce: %w", err)
			}
			prod = append(prod, m)
			b0 = brokerCPU(c.brokerPID)
			m, err = consume(ctx, c.brokers, in, n)
			m.broker = brokerCPU(c.brokerPID) - b0
			if err != nil {
				return fmt.Errorf("ceiling consume: %w", err)
			}
			cons = append(cons, m)
			out := fmt.Sprintf("kb-eos-%s-%d", run, r)
			if _, err := adm.CreateTopic(ctx, int32(c.partitions), 1, nil, out); err != nil {
				return err
			}
			b0 = brokerCPU(c.brokerPID)
			m, err = transact(ctx, c.brokers, in, out, fmt.Sprintf("kb-eos-%s-%d", run, r), n)
			m.broker = brokerCPU(c.brokerPID) - b0
			if err != nil {
				return fmt.Errorf("ceiling eos: %w", err)
			}
			eos = append(eos, m)
			return dropTopics(ctx, adm, topic, out)
		}
		ubik := func() error {
			bins := []string{c.ubik}
			if c.baseline != "" {
				bins = append(bins, c.baseline)
				if r%2 == 1 {
					bins[0], bins[1] = bins[1], bins[0]
				}
			}
			for _, byKey := range []bool{true, false} {
				for _, bin := range bins {
					name := fmt.Sprintf("kb_%s_%d_%t_%t", run, r, byKey, bin == c.baseline)
					b0 := brokerCPU(c.brokerPID)
					m, err := runUbik(c, bin, in, name, byKey)
					m.broker = brokerCPU(c.brokerPID) - b0
					if err != nil {
						return err
					}
					if err := dropTopics(ctx, adm, name+"_out", name+"-state", name+"-repartition"); err != nil {
						return err
					}
					switch {
					case byKey && bin == c.baseline:
						baseDirect = append(baseDirect, m)
					case byKey:
						direct = append(direct, m)
					case bin == c.baseline:
						baseRepart = append(baseRepart, m)
					default:
						repart = append(repart, m)
					}
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
		fmt.Printf("pair %d: produce %s, consume %s, eos %s, ubik direct %s (cpu %.2f+%.2f), ubik repartitioned %s (cpu %.2f+%.2f)\n", r+1,
			rate(n, prod[r]), rate(n, cons[r]), rate(n, eos[r]), rate(n, direct[r]), direct[r].cpu, direct[r].broker,
			rate(n, repart[r]), repart[r].cpu, repart[r].broker)
		if c.baseline != "" {
			fmt.Printf("pair %d, baseline: ubik direct %s (cpu %.2f+%.2f), ubik repartitioned %s (cpu %.2f+%.2f)\n", r+1,
				rate(n, baseDirect[r]), baseDirect[r].cpu, baseDirect[r].broker, rate(n, baseRepart[r]), baseRepart[r].cpu, baseRepart[r].broker)
		}
	}

	fmt.Printf("\n| path | events/s (median of %d) | CPU s | broker CPU s | CPU µs/event (both) | vs consume (pairs) | vs eos (pairs) | vs eos, CPU (pairs) |\n|---|---:|---:|---:|---:|---|---|---|\n", c.repeat)
	row := func(what string, ms []measure) {
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", what, rate(n, median(ms)), cpuText(ms), brokerText(ms),
			perEvent(n, ms), ratios(ms, cons), ratios(ms, eos), cpuRatios(ms, eos))
	}
	row("franz-go producer (ceiling)", prod)
	row("franz-go consumer, read_committed (ceiling)", cons)
	row("franz-go read-process-write, transactions (eos ceiling)", eos)
	row("ubik run, --partitioned-by-key, exactly once", direct)
	row("ubik run, repartitioned, exactly once", repart)
	if c.baseline != "" {
		row("baseline: ubik run, --partitioned-by-key", baseDirect)
		row("baseline: ubik run, repartitioned", baseRepart)
		fmt.Printf("\nnew against baseline, pairs (throughput; CPU of ubik and broker):\n")
		fmt.Printf("  direct:        %s; %s\n", ratios(direct, baseDirect), cpuRatios(direct, baseDirect))
		fmt.Printf("  repartitioned: %s; %s\n", ratios(repart, baseRepart), cpuRatios(repart, baseRepart))
	}
	return nil
}

// transact is the exactly-once ceiling: a franz-go read-process-write
// loop with no processing. It consumes topic from the start with
// read_committed in a group, and per transaction (the polls of 100 ms)
// produces one record per input partition it read to out and commits the
// offsets, until it has n records.
func transact(ctx context.Context, brokers, topic, out, group string, n int) (measure, error) {
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.TransactionalID(group),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(out), kgo.ProducerLinger(0))
	if err != nil {
		return measure{}, err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start, cpu0 := time.Now(), selfCPU()
	got := 0
	for got < n {
		if err := s.Begin(); err != nil {
			return measure{}, err
		}
		last := map[int32]int64{}
		for deadline := time.Now().Add(100 * time.Millisecond); got < n && time.Now().Before(deadline); {
			pctx, pcancel := context.WithDeadline(ctx, deadline)
			fs := s.PollRecords(pctx, 10000)
			pcancel()
			if ctx.Err() != nil {
				return measure{}, ctx.Err()
			}
			var ferr error
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && ferr == nil {
					ferr = err
				}
			})
			if ferr != nil {
				return measure{}, ferr
			}
			fs.EachRecord(func(r *kgo.Record) {
				got++
				last[r.Partition] = r.Offset
			})
		}
		for part, off := range last {
			s.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(int(part))), Value: strconv.AppendInt(nil, off, 10)}, nil)
		}
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			return measure{}, err
		}
		if !committed {
			return measure{}, errors.New("a transaction did not commit")
		}
	}
	return measure{wall: time.Since(start).Seconds(), cpu: selfCPU() - cpu0}, nil
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
func runUbik(c config, bin, in, name string, byKey bool) (measure, error) {
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
	cmd := exec.Command(bin, args...)
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

func brokerText(ms []measure) string {
	m := median(ms)
	if m.broker == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", m.broker)
}

// perEvent is the median run's CPU microseconds per event, the process's
// and the broker's together.
func perEvent(n int, ms []measure) string {
	m := median(ms)
	return fmt.Sprintf("%.2f", (m.cpu+m.broker)/float64(n)*1e6)
}

// cpuRatios is the median of the pairwise ratios of CPU seconds (the
// process's and the broker's together) b/a: how many times a's CPU cost per
// event b's is, and each pair.
func cpuRatios(a, b []measure) string {
	rs := make([]float64, len(a))
	parts := make([]string, len(a))
	for i := range a {
		rs[i] = (b[i].cpu + b[i].broker) / (a[i].cpu + a[i].broker)
		parts[i] = fmt.Sprintf("%.2f", rs[i])
	}
	s := slices.Clone(rs)
	slices.Sort(s)
	return fmt.Sprintf("**%.2f** (%s)", s[len(s)/2], strings.Join(parts, ", "))
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
