// Command ubik-broker runs an in-memory (or on-disk, with --data-dir)
// Kafka-protocol broker for scripts, the CLI and end-to-end tests: franz-go's
// kfake cluster (the patched copy in third_party/kfake) bound to 127.0.0.1.
//
// Topic auto-creation is off by default, as on a production cluster: code
// under test must create its topics (tests that pass only because a broker
// auto-created a topic would fail against real Kafka). The log cleaner runs
// every second by default so that compaction is observable in a test, also
// after a restart on the same --data-dir; like Kafka's, it cleans only below
// the last stable offset, so an open transaction is never compacted.
//
// It prints "ready" on stdout once every listener is bound, and exits with
// status 0 on SIGTERM or SIGINT after closing the cluster (which flushes the
// data directory when one is given).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// configFlag collects repeated --broker-config key=value flags.
type configFlag map[string]string

func (f configFlag) String() string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k+"="+f[k])
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (f configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("expected key=value, got %q", s)
	}
	f[k] = v
	return nil
}

// options is the parsed command line.
type options struct {
	port      int
	brokers   int
	dataDir   string
	autoTopic bool
	partition int
	configs   configFlag
	logLevel  string
	cpuProf   string
}

func parse(args []string, stderr io.Writer) (options, error) {
	o := options{configs: configFlag{}}
	fs := flag.NewFlagSet("ubik-broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.port, "port", 9092, "port of the first broker; broker i listens on port+i (127.0.0.1 only)")
	fs.IntVar(&o.brokers, "brokers", 1, "number of brokers in the cluster")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory that persists the cluster's state across restarts (default: in memory)")
	fs.BoolVar(&o.autoTopic, "allow-auto-topic-creation", false, "create a topic when a client first produces to or fetches it (off: like a production cluster)")
	fs.IntVar(&o.partition, "default-partitions", 0, "partitions of an auto-created topic (0: kfake's default)")
	fs.Var(o.configs, "broker-config", "broker config key=value (repeatable); log.cleaner.backoff.ms defaults to 1000")
	fs.StringVar(&o.logLevel, "log-level", "none", "kfake log level on stderr: none, error, warn, info, debug")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a Go CPU profile of the broker to this file, ended at SIGTERM or SIGINT (for performance work)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.port <= 0 || o.port > 65535 {
		return o, fmt.Errorf("--port %d out of range 1..65535", o.port)
	}
	if o.brokers < 1 || o.port+o.brokers-1 > 65535 {
		return o, fmt.Errorf("--brokers %d: need at least 1, and port+brokers-1 <= 65535", o.brokers)
	}
	if o.partition < 0 {
		return o, fmt.Errorf("--default-partitions %d is negative", o.partition)
	}
	if _, ok := o.configs["log.cleaner.backoff.ms"]; !ok {
		// kfake's default is an hour; a second makes compaction visible in tests.
		o.configs["log.cleaner.backoff.ms"] = "1000"
	}
	return o, nil
}

func logLevel(s string) (kfake.LogLevel, error) {
	switch strings.ToLower(s) {
	case "none", "":
		return kfake.LogLevelNone, nil
	case "error":
		return kfake.LogLevelError, nil
	case "warn":
		return kfake.LogLevelWarn, nil
	case "info":
		return kfake.LogLevelInfo, nil
	case "debug":
		return kfake.LogLevelDebug, nil
	}
	return 0, fmt.Errorf("unknown --log-level %q (none, error, warn, info, debug)", s)
}

func clusterOpts(o options, stderr io.Writer) ([]kfake.Opt, error) {
	lvl, err := logLevel(o.logLevel)
	if err != nil {
		return nil, err
	}
	ports := make([]int, o.brokers)
	for i := range ports {
		ports[i] = o.port + i
	}
	opts := []kfake.Opt{
		kfake.Ports(ports...),
		kfake.BrokerConfigs(map[string]string(o.configs)),
		kfake.WithLogger(kfake.BasicLogger(stderr, lvl)),
	}
	if o.autoTopic {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if o.partition > 0 {
		opts = append(opts, kfake.DefaultNumPartitions(o.partition))
	}
	if o.dataDir != "" {
		opts = append(opts, kfake.DataDir(o.dataDir))
	}
	return opts, nil
}

func run(args []string, stdout, stderr io.Writer, stop <-chan os.Signal) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "ubik-broker:", err)
		return 2
	}
	opts, err := clusterOpts(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "ubik-broker:", err)
		return 2
	}
	if o.cpuProf != "" {
		f, err := os.Create(o.cpuProf)
		if err != nil {
			fmt.Fprintln(stderr, "ubik-broker: --cpuprofile:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "ubik-broker: --cpuprofile:", err)
			return 2
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "ubik-broker: starting %d broker(s) on 127.0.0.1:%d: %v\n", o.brokers, o.port, err)
		return 1
	}
	fmt.Fprintf(stderr, "ubik-broker: listening on %s\n", strings.Join(c.ListenAddrs(), ","))
	fmt.Fprintln(stdout, "ready")

	sig := <-stop
	fmt.Fprintf(stderr, "ubik-broker: %v, shutting down\n", sig)
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
		return 0
	case <-time.After(30 * time.Second):
		fmt.Fprintln(stderr, "ubik-broker: cluster did not close within 30s")
		return 1
	case sig = <-stop:
		fmt.Fprintf(stderr, "ubik-broker: second %v, exiting without a clean close\n", sig)
		return 1
	}
}

func main() {
	stop := make(chan os.Signal, 2)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, stop))
}
