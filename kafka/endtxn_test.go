package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ubiksql/ubik/internal/drive"
)

// lostEndTxn stalls, on the client's side, the answer to chosen EndTxn
// commit requests: the broker receives and commits the transaction, and
// the client hears nothing until its deadline passes (a broker paused
// right after the commit, or a process starved of CPU while the answer
// waits in its socket). End then fails with a deadline, and the outcome
// of the transaction, committed, is unknown to the client.
type lostEndTxn struct {
	stall   time.Duration
	mu      sync.Mutex
	targets map[string]int // transactional id -> commits to let through before stalling one
	fired   atomic.Int32
}

func (h *lostEndTxn) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, h: h, wake: make(chan struct{})}, nil
}

// matches reports whether the request in b is an EndTxn commit of a
// target whose turn it is. A kgo request is one Write: size, key,
// version, correlation id, client id, then (flexible versions) tags.
func (h *lostEndTxn) matches(b []byte) bool {
	if len(b) < 14 || int16(binary.BigEndian.Uint16(b[4:])) != kmsg.EndTxn.Int16() {
		return false
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = int16(binary.BigEndian.Uint16(b[6:]))
	off := 14 + max(int(int16(binary.BigEndian.Uint16(b[12:]))), 0)
	if off > len(b) {
		return false
	}
	r := kbin.Reader{Src: b[off:]}
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := req.ReadFrom(r.Src); err != nil || !req.Commit {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.targets[req.TransactionalID]
	if !ok {
		return false
	}
	if n > 0 {
		h.targets[req.TransactionalID] = n - 1
		return false
	}
	delete(h.targets, req.TransactionalID)
	h.fired.Add(1)
	return true
}

// stallConn is a connection whose next read after a matching write waits
// for the stall, or until its read deadline (kgo sets it when the
// request's context ends) and then fails as a deadline does.
type stallConn struct {
	net.Conn
	h        *lostEndTxn
	mu       sync.Mutex
	stalled  bool
	deadline time.Time
	wake     chan struct{} // closed when the deadline changes
}

func (c *stallConn) Write(b []byte) (int, error) {
	if c.h.matches(b) {
		c.mu.Lock()
		c.stalled = true
		c.mu.Unlock()
	}
	return c.Conn.Write(b)
}

func (c *stallConn) setDeadline(t time.Time) {
	c.mu.Lock()
	c.deadline = t
	close(c.wake)
	c.wake = make(chan struct{})
	c.mu.Unlock()
}

func (c *stallConn) SetReadDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.setDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if c.stalled {
		c.stalled = false
		until := time.Now().Add(c.h.stall)
		for time.Now().Before(until) {
			dl, wake := c.deadline, c.wake
			if !dl.IsZero() && !time.Now().Before(dl) {
				c.mu.Unlock()
				return 0, os.ErrDeadlineExceeded
			}
			wait := time.Until(until)
			if !dl.IsZero() && time.Until(dl) < wait {
				wait = time.Until(dl)
			}
			c.mu.Unlock()
			select {
			case <-wake:
			case <-time.After(wait):
			}
			c.mu.Lock()
		}
	}
	c.mu.Unlock()
	return c.Conn.Read(b)
}

// TestEndTxnAnswerLost: the answer to an EndTxn commit of each stage is
// lost past the client's deadline, after the broker committed (the
// ambiguous end a CPU-starved `--until-caught-up` run met and exited 1
// on). Each stage must start over from what the broker committed, not
// from what the client last saw committed (that would apply the
// committed transaction's input twice), and not fail: the run catches up
// by itself, and the read_committed changelog has every final equal to
// the oracle, no (key, revision) twice and no revision going backwards.
// Its counts and bad-event reports are each record's once: the stalled
// transactions committed, so the next session adds theirs.
func TestEndTxnAnswerLost(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 3, nil)
	evs := genEvents(13, 12000)
	// A malformed record every 150 events: each transaction of the
	// repartition stage, the stalled one too, reports some.
	var values [][]byte
	for i, e := range evs {
		if i%150 == 0 {
			values = append(values, []byte(fmt.Sprintf(`{"merchant":%d`, i)))
		}
		values = append(values, e.json())
	}
	bad := len(values) - len(evs)
	produceValues(t, addrs, "events", 3, values, nil)
	var mu sync.Mutex
	reported := map[string]int{}
	q := tumbleQuery("lost", 100*time.Millisecond)
	tt := 5 * time.Second
	h := &lostEndTxn{stall: tt + time.Second, targets: map[string]int{q.Name + "-in.a": 2, q.Name + ".a": 2}}
	// CommitRecords makes each stage commit at least twelve times, so each
	// has a third commit to stall: by the interval alone, an aggregating
	// stage whose group join was slow (tests in parallel) found every
	// event routed and took them all in its first two transactions.
	st := runUntilCaughtUp(t, Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a",
		Logger: testLogger(t), MaxPollRecords: 1000, CommitRecords: 1000, TransactionTimeout: tt, ClientOpts: []kgo.Opt{kgo.Dialer(h.dial)},
		OnBadEvent: func(e *BadEvent) {
			mu.Lock()
			defer mu.Unlock()
			reported[fmt.Sprintf("%d/%d", e.Partition, e.Offset)]++
		}})
	if n := h.fired.Load(); n != 2 {
		t.Fatalf("%d EndTxn answers stalled, want 2 (one per stage)", n)
	}
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(evs), 30*time.Second)
	if st.EventsIn != int64(len(values)) || st.Malformed != int64(bad) {
		t.Errorf("%d events consumed, %d malformed; want %d and %d (a transaction's input consumed again, or its counts lost)", st.EventsIn, st.Malformed, len(values), bad)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != bad {
		t.Errorf("%d malformed records reported, want %d (a committed transaction's reports lost)", len(reported), bad)
	}
	for at, n := range reported {
		if n != 1 {
			t.Errorf("the malformed record at %s reported %d times", at, n)
		}
	}
	if st.Redos < 2 {
		t.Errorf("%d sessions started again after a failed end, want at least 2", st.Redos)
	}
}

// TestAbortedTransactionsCountOnce: the broker refuses each stage's first
// two produce requests of each run (a record it will not take), so the
// transactions that carried them abort, and each stage reads their input
// again. The first run reads the events, the second, resumed, three
// malformed and three late ones (an hour behind the restored watermark).
// Every count (events, malformed, late, records produced) is each
// committed record's once, each bad and late event is reported once, and
// the finals are the oracle's: before, an aborted transaction's events
// were counted and reported a second time when read again.
func TestAbortedTransactionsCountOnce(t *testing.T) {
	t.Parallel()
	c := cluster(t)
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "events", 3, nil)
	evs := genEvents(17, 6000)
	produceEvents(t, addrs, "events", 3, evs, false)
	bad := [][]byte{[]byte(`{"merchant":`), []byte(`not json`), []byte(`[1,`)}
	var late [][]byte
	for i := range 3 {
		late = append(late, event{merchant: fmt.Sprintf("late%d", i), amount: 1, ts: baseTS - 3600_000_000}.json())
	}
	var refused atomic.Int32
	var refuseMu sync.Mutex
	var refuse map[string]int // by transactional id: the repartition stage's, the aggregating stage's
	c.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		refuseMu.Lock()
		defer refuseMu.Unlock()
		if req.TransactionID == nil || refuse[*req.TransactionID] == 0 {
			return nil, nil, false
		}
		refuse[*req.TransactionID]--
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.InvalidRecord.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	q := tumbleQuery("aborts", 100*time.Millisecond)
	var mu sync.Mutex
	reported := map[string]int{} // each bad and late event handed over, by what it was
	o := Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a",
		Logger: testLogger(t), MaxPollRecords: 500, CommitRecords: 500,
		OnBadEvent: func(e *BadEvent) {
			mu.Lock()
			defer mu.Unlock()
			reported[fmt.Sprintf("bad %d/%d", e.Partition, e.Offset)]++
		},
		OnLate: func(ev *drive.LateEvent) {
			mu.Lock()
			defer mu.Unlock()
			reported["late "+string(ev.Event)]++
		}}
	run := func(events, malformed, lateN int) Stats {
		t.Helper()
		refused.Store(0)
		refuseMu.Lock()
		refuse = map[string]int{"aborts-in.a": 2, "aborts.a": 2}
		refuseMu.Unlock()
		st := runUntilCaughtUp(t, o)
		if n := refused.Load(); n != 4 || st.Aborts < 2 {
			t.Fatalf("%d produce requests refused, %d aborts: want 4 refused and an abort in each stage", n, st.Aborts)
		}
		if st.EventsIn != int64(events) || st.Malformed != int64(malformed) || st.Late != int64(lateN) {
			t.Errorf("%d events consumed, %d malformed, %d late; want %d, %d and %d, each once", st.EventsIn, st.Malformed, st.Late, events, malformed, lateN)
		}
		return st
	}
	st := run(len(evs), 0, 0)
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, tumbleOracle(evs), 30*time.Second)
	produceValues(t, addrs, "events", 3, append(bad, late...), nil)
	st2 := run(len(bad)+len(late), len(bad), len(late))
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != len(bad)+len(late) {
		t.Errorf("reported %v: want the %d bad and %d late events", reported, len(bad), len(late))
	}
	for what, n := range reported {
		if n != 1 {
			t.Errorf("%s reported %d times, want once", what, n)
		}
	}
	f.poll(2 * time.Second) // the second run's records: none
	st.RecordsOut += st2.RecordsOut
	f.mu.Lock()
	n := int64(f.n)
	f.mu.Unlock()
	if st.RecordsOut != n {
		t.Errorf("%d records produced counted, the sink holds %d committed", st.RecordsOut, n)
	}
}
