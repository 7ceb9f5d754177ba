package kafka

import (
	"context"
	"fmt"

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
	*d = nil
	return nil
}
