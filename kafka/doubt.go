package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// inDoubt is a transaction whose end failed with its outcome unknown: the
// broker may have committed it. Its counts and reports wait for the next
// session of the stage, which asks the group's committed offsets
// (resolveDoubt): a committed transaction's records are not read again,
// so its counts are added and its reports handed over then; an aborted
// one's are read, counted and reported again.
type inDoubt struct {
	counts  txnCounts
	reports []func()
	offsets map[string]map[int32]kgo.EpochOffset // the input offsets it was to commit
}

// resolveDoubt settles *d, if any, by the group's stable committed
// offsets: the transaction committed if they reached its own.
func (p *Pipeline) resolveDoubt(ctx context.Context, group string, d **inDoubt) error {
	if *d == nil {
		return nil
	}
	adm, closeAdm, err := p.admin()
	if err != nil {
		return err
	}
	defer closeAdm()
	committed, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
	if err != nil {
		return fmt.Errorf("kafka: committed offsets of group %s: %w", group, err)
	}
	done := len((*d).offsets) > 0
	for topic, parts := range (*d).offsets {
		for part, o := range parts {
			c, ok := committed.Lookup(topic, part)
			done = done && ok && c.Err == nil && c.At >= o.Offset
		}
	}
	tx := &txn{counts: (*d).counts, reports: (*d).reports}
	tx.settle(p, done)
	if done { // counted as an abort when its end failed
		p.c.aborts.Add(-1)
		p.c.commits.Add(1)
	}
	*d = nil
	return nil
}

// lastDoubtGrace bounds how long a stopping stage waits to learn the
// outcome of its last transaction end (the broker settles it at once
// unless it is out of reach).
const lastDoubtGrace = 5 * time.Second

// settleLastDoubt settles a transaction end of unknown outcome that no
// next session settled: the run stopped, or failed, right after it. It
// asks the broker once more, within lastDoubtGrace whatever the stop, so
// a committed transaction's counts and reports are not lost; if the
// broker does not answer, it says what the counts leave out.
func (p *Pipeline) settleLastDoubt(ctx context.Context, group string, d **inDoubt) {
	if *d == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lastDoubtGrace)
	defer cancel()
	if err := p.resolveDoubt(sctx, group, d); err != nil {
		c := (*d).counts
		p.log.Warn("kafka: the outcome of the last transaction is unknown (the broker did not say whether it committed): its events are not in the counts and its bad and late events were not reported",
			"group", group, "events", c.eventsIn, "records_out", c.recordsOut, "reports", len((*d).reports), "err", err)
		*d = nil
	}
}
