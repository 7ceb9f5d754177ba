package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker's side of a chaos round, for the rounds that go wrong or
// slow: every request that decides a transaction's or a membership's fate
// (InitProducerID, EndTxn, TxnOffsetCommit, JoinGroup, SyncGroup,
// LeaveGroup, a heartbeat that is not the routine one) with its time, and
// kfake's own warnings (transaction timeouts, session timeouts). A
// process's log says what it did; this says what the broker was asked.

const (
	envChaosSlow   = "UBIK_E2E_CHAOS_SLOW"   // seconds: a final catch-up slower than this is a slow round; default 15
	envChaosAborts = "UBIK_E2E_CHAOS_ABORTS" // a final catch-up aborting more transactions than this is a slow round; default 20
)

// brokerTrace writes the broker's view of a round to a file.
type brokerTrace struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

func newBrokerTrace(path string) (*brokerTrace, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &brokerTrace{f: f, path: path}, nil
}

func (b *brokerTrace) Logf(level kfake.LogLevel, msg string, args ...any) {
	if level > kfake.LogLevelWarn {
		return
	}
	b.line("broker %s: "+msg, append([]any{level}, args...)...)
}

func (b *brokerTrace) line(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(b.f, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func (b *brokerTrace) mark(what string) { b.line("=== %s", what) }

func (b *brokerTrace) close() { b.f.Close() }

// observe records the requests that decide transactions and memberships
// (not handled: the broker answers them as usual).
func (b *brokerTrace) observe(c *kfake.Cluster) {
	keys := []int16{int16(kmsg.InitProducerID), int16(kmsg.EndTxn), int16(kmsg.TxnOffsetCommit), int16(kmsg.JoinGroup),
		int16(kmsg.SyncGroup), int16(kmsg.LeaveGroup)}
	for _, k := range keys {
		c.ControlKey(k, func(req kmsg.Request) (kmsg.Response, error, bool) {
			switch r := req.(type) {
			case *kmsg.InitProducerIDRequest:
				b.line("InitProducerID txn=%s producer=%d epoch=%d", deref(r.TransactionalID), r.ProducerID, r.ProducerEpoch)
			case *kmsg.EndTxnRequest:
				b.line("EndTxn txn=%s producer=%d epoch=%d commit=%v", r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit)
			case *kmsg.TxnOffsetCommitRequest:
				b.line("TxnOffsetCommit txn=%s group=%s producer=%d epoch=%d generation=%d member=%s instance=%s",
					r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation, r.MemberID, deref(r.InstanceID))
			case *kmsg.JoinGroupRequest:
				b.line("JoinGroup group=%s member=%s instance=%s", r.Group, r.MemberID, deref(r.InstanceID))
			case *kmsg.SyncGroupRequest:
				b.line("SyncGroup group=%s member=%s instance=%s generation=%d", r.Group, r.MemberID, deref(r.InstanceID), r.Generation)
			case *kmsg.LeaveGroupRequest:
				var ids []string
				for _, m := range r.Members {
					ids = append(ids, deref(m.InstanceID))
				}
				b.line("LeaveGroup group=%s instances=%v", r.Group, ids)
			}
			return nil, nil, false
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// chaosThresholds are the limits past which a round's final catch-up is
// reported as slow, with its logs kept.
func chaosThresholds() (time.Duration, int64) {
	slow, aborts := 15*time.Second, int64(20)
	if s := os.Getenv(envChaosSlow); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			slow = time.Duration(v) * time.Second
		}
	}
	if s := os.Getenv(envChaosAborts); s != "" {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v >= 0 {
			aborts = v
		}
	}
	return slow, aborts
}

var summaryAborts = regexp.MustCompile(`(\d+) aborts`)

// summaryCount returns the number the final summary line gives for
// "N aborts" (-1 if there is none).
func summaryCount(out string) int64 {
	m := summaryAborts.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return -1
	}
	v, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	return v
}

// abortDigest counts the lines of a ubik log that tell why a
// transaction did not commit (kgo's session end with will_try_commit=false,
// ubik's warnings, restores, redos, fencing), by message (the slog msg=
// field and the fields that do not vary line to line).
func abortDigest(log string) string {
	counts := map[string]int{}
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "kafka:") && !strings.Contains(l, "transaction session ending") {
			continue
		}
		if !strings.Contains(l, "level=WARN") && !strings.Contains(l, "abort") && !strings.Contains(l, "will_try_commit=false") &&
			!strings.Contains(l, "restor") && !strings.Contains(l, "redo") && !strings.Contains(l, "fenc") {
			continue
		}
		msg := l
		if i := strings.Index(l, "msg="); i >= 0 {
			msg = l[i:]
			// drop the fields that differ line to line
			for _, f := range []string{" time=", " err=", " generation=", " group="} {
				if j := strings.Index(msg, f); j >= 0 {
					msg = msg[:j]
				}
			}
		}
		counts[msg]++
	}
	var lines []string
	for m, n := range counts {
		lines = append(lines, fmt.Sprintf("%6d  %s", n, m))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// keepRoundLogs copies the round's logs to keep/SEED and says where (or,
// with no keep directory, how to keep them: the test's own directory is
// removed when it ends).
func keepRoundLogs(dir, keep string, seed uint64) string {
	if keep == "" {
		return "nowhere (" + envChaosKeep + "=DIR keeps them)"
	}
	to := filepath.Join(keep, fmt.Sprint(seed))
	if err := os.MkdirAll(to, 0o755); err != nil {
		return fmt.Sprintf("nowhere (%v)", err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			os.WriteFile(filepath.Join(to, filepath.Base(l)), b, 0o644)
		}
	}
	return to
}

// tailFrom returns the lines of path at or after the line containing
// marker, at most n of them (the last n).
func tailFrom(path, marker string, n int) string {
	b, _ := os.ReadFile(path)
	s := string(b)
	if i := strings.Index(s, marker); i >= 0 {
		s = s[i:]
	}
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = append([]string{fmt.Sprintf("(%d lines before)", len(ls)-n)}, ls[len(ls)-n:]...)
	}
	return strings.Join(ls, "\n")
}
