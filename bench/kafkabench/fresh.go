package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// freshColumn is the column of the freshness query's value that holds the
// newest send time (ms) of the record's (group, window).
const freshColumn = "max_sent_ms"

// runFresh is the freshness mode: ubik runs the query over Kafka, exactly
// once, while a paced producer feeds it and a read_committed reader of the
// sink times every record; then the table.
func runFresh(c config) error {
	ctx := context.Background()
	stop, err := connect(&c)
	if err != nil {
		return err
	}
	defer stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	name := "kb_fresh_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	in, out := name+"_in", name+"_out"
	if err := createTopics(ctx, adm, c.partitions, in, out); err != nil {
		return err
	}
	defer func() {
		if err := dropTopics(ctx, adm, in, out, name+"-state", name+"-repartition"); err != nil {
			fmt.Fprintln(os.Stderr, "kafkabench:", err)
		}
	}()
	fmt.Printf("kafkabench fresh: %d events/s for %s, %d groups, %d partitions, brokers %s, %s\n",
		c.fresh.rate, c.fresh.duration, c.fresh.groups, c.partitions, c.brokers, layout(c.fresh.byKey))
	u, err := startUbik(c, in, out, name)
	if err != nil {
		return err
	}
	r, err := measureFresh(ctx, c, in, out)
	ucpu, uerr := u.stop()
	if err != nil {
		return err
	}
	if uerr != nil {
		return uerr
	}
	r.ubikCPU = ucpu
	r.print(c)
	return nil
}

func layout(byKey bool) string {
	if byKey {
		return "--partitioned-by-key"
	}
	return "repartitioned"
}

// createTopics makes the run's input topic and its compacted sink topic
// before anything reads them, so the reader sees the sink from the start.
func createTopics(ctx context.Context, adm *kadm.Client, partitions int, in, out string) error {
	if _, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, in); err != nil {
		return fmt.Errorf("creating %s: %w", in, err)
	}
	compact := "compact"
	if _, err := adm.CreateTopic(ctx, int32(partitions), 1, map[string]*string{"cleanup.policy": &compact}, out); err != nil {
		return fmt.Errorf("creating %s: %w", out, err)
	}
	return nil
}

// freshRun is one freshness run's figures.
type freshRun struct {
	fresh                 *freshness
	produced              int64
	span                  time.Duration // first produce to the last ack
	ubikCPU, broker, self float64
}

// measureFresh produces for the run's duration while the reader reads the
// sink, reads on for the grace period, and returns what both saw.
func measureFresh(ctx context.Context, c config, in, out string) (*freshRun, error) {
	f := c.fresh
	start := time.Now()
	b0, s0 := brokerCPU(c.brokerPID), selfCPU()
	seconds := int((f.duration + f.grace).Seconds()) + 2
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var fr *freshness
	var rerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		fr, rerr = readSink(rctx, c.brokers, out, start, f.warmup, seconds)
	}()
	produced, span, perr := produceSteady(ctx, c, in, start)
	if perr == nil {
		time.Sleep(f.grace)
	}
	cancel()
	wg.Wait()
	if err := errors.Join(perr, rerr); err != nil {
		return nil, err
	}
	return &freshRun{fresh: fr, produced: produced, span: span,
		broker: brokerCPU(c.brokerPID) - b0, self: selfCPU() - s0}, nil
}

// readSink reads the sink topic, read_committed, from its start until ctx
// ends, and times each record against its max_sent_ms. A record's arrival
// is when the poll that returned it came back.
func readSink(ctx context.Context, brokers, topic string, start time.Time, warmup time.Duration, seconds int) (*freshness, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	fr := newFreshness(seconds)
	pattern := fieldPattern(freshColumn)
	startMs, warmEnd := start.UnixMilli(), start.Add(warmup).UnixMilli()
	for {
		fs := cl.PollFetches(ctx)
		arrival := time.Now().UnixMilli()
		if ctx.Err() != nil {
			return fr, nil
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) { fr.record(r, pattern, arrival, startMs, warmEnd) })
	}
}

// ubikProc is the running `ubik run` and where its output goes.
type ubikProc struct {
	cmd *exec.Cmd
	log *os.File
}

// startUbik starts `ubik run` over the input topic into the sink topic,
// exactly once, as a fresh query name (nothing restored), without
// --until-caught-up: it runs until stopped.
func startUbik(c config, in, out, name string) (*ubikProc, error) {
	script, err := os.ReadFile(c.query)
	if err != nil {
		return nil, err
	}
	q := filepath.Join(c.work, name+".sql")
	if err := os.WriteFile(q, []byte(renameView(string(script), name)), 0o644); err != nil {
		return nil, err
	}
	args := []string{"run", q, "--source", "kafka://" + c.brokers + "/" + in, "--sink", "kafka://" + c.brokers + "/" + out,
		"--no-progress", "--quiet", "--instance-id", "kb"}
	if c.fresh.byKey {
		args = append(args, "--partitioned-by-key")
	}
	if c.fresh.ubikProfile != "" {
		args = append(args, "--cpuprofile", c.fresh.ubikProfile)
	}
	log, err := os.Create(filepath.Join(c.work, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.ubik, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	return &ubikProc{cmd: cmd, log: log}, nil
}

// stop ends ubik with SIGTERM (a Kafka run ends its transaction and exits
// 0, or 143 before that rule), killing it after 30 s, and returns its CPU
// seconds.
func (u *ubikProc) stop() (float64, error) {
	defer u.log.Close()
	_ = u.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- u.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = u.cmd.Process.Kill()
		<-done
		err = errors.New("did not stop within 30 s of SIGTERM")
	}
	// Older binaries exit 143 at SIGTERM; that is a stop too.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 143) {
		return 0, fmt.Errorf("ubik run: %v (its output: %s)", err, u.log.Name())
	}
	ru := u.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(), nil
}

// print writes the run's table and its input figures.
func (r *freshRun) print(c config) {
	f := c.fresh
	fmt.Printf("\ninput: %d events in %.1f s, %.0f events/s achieved (target %d); the producer's linger %s\n",
		r.produced, r.span.Seconds(), float64(r.produced)/r.span.Seconds(), f.rate, f.linger)
	fmt.Printf("CPU s over the run: ubik %.2f, broker %s, this process (producer and reader) %.2f\n\n",
		r.ubikCPU, cpuOrNone(r.broker), r.self)
	r.fresh.table(os.Stdout, f.warmup)
	fmt.Printf("\nearly records' max latency (ms) per second since the producer started:\n ")
	for _, ms := range r.fresh.perSecond {
		fmt.Printf(" %d", ms)
	}
	fmt.Println()
}

func cpuOrNone(s float64) string {
	if s == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", s)
}
