package cli

import (
	"fmt"
	"os"
	"sync"

	"github.com/ubiksql/ubik"
)

// kafkaLate is --late-output of a Kafka run: each late event as a JSON
// line, appended, so the runs of one query (restarts included) add to
// one file. A transaction that aborts is redone, so after an abort a late
// event can be written twice. The queries of one run write it side by
// side, a line at a time.
type kafkaLate struct {
	path  string
	mu    sync.Mutex
	f     *os.File
	buf   []byte
	first error // the first write error
}

// open opens the file to append to (none without --late-output).
func (l *kafkaLate) open() error {
	if l.path == "" {
		return nil
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	l.f = f
	return nil
}

// write writes one late event (kafka.Options.OnLateEvent).
func (l *kafkaLate) write(name string, ev *ubik.LateEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = appendLate(l.buf[:0], name, 0, ev)
	if _, err := l.f.Write(l.buf); err != nil && l.first == nil {
		l.first = fmt.Errorf("--late-output %s: %w", l.path, err)
	}
}

// err is the first write error.
func (l *kafkaLate) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// hook is write, or nil without --late-output (it writes once open).
func (l *kafkaLate) hook() func(string, *ubik.LateEvent) {
	if l.path == "" {
		return nil
	}
	return l.write
}

func (l *kafkaLate) close() {
	if l.f != nil {
		l.f.Close()
	}
}
