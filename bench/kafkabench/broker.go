package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// connect makes the work directory and starts the private broker (with
// --broker) or takes the given brokers; stop ends the private broker.
func connect(c *config) (stop func(), err error) {
	if err := os.MkdirAll(c.work, 0o755); err != nil {
		return nil, err
	}
	stop = func() {}
	if c.broker != "" {
		addr, pid, end, err := startBroker(*c)
		if err != nil {
			return nil, err
		}
		stop, c.brokers, c.brokerPID = end, addr, pid
	}
	if c.brokers == "" {
		c.brokers = os.Getenv("UBIK_KAFKA_BROKERS")
	}
	if c.brokers == "" {
		stop()
		return nil, errors.New("no broker: give --broker BINARY or --brokers HOST:PORT (or set UBIK_KAFKA_BROKERS)")
	}
	return stop, nil
}

// dropTopics deletes a run's topics once it is measured: a broker that
// keeps them spends its cleaner's passes on them during the later runs,
// which would charge one run's broker CPU with another's topics.
func dropTopics(ctx context.Context, adm *kadm.Client, topics ...string) error {
	rs, err := adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("deleting %v: %w", topics, err)
	}
	for _, r := range rs {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("deleting topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

func startBroker(c config) (string, int, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.Create(filepath.Join(c.work, "broker.log"))
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(c.broker, "--port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
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
			return "", 0, nil, fmt.Errorf("broker did not listen on %s: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return addr, cmd.Process.Pid, func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() }, nil
}

// brokerCPU is the private broker's CPU seconds so far (user + system,
// from /proc; Linux reports them in ticks of 1/100 s), or 0 without one.
func brokerCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and
	// may hold spaces: state is field 3, utime and stime 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
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
