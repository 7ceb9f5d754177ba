package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// checkDataLoss compares the source group's committed offsets with the
// source's log start offsets: records between the two were deleted
// (retention, DeleteRecords) before the query read them, and a consumer
// would skip them without a word (it resumes at the log start). That is
// an error naming the partitions and the records lost, unless
// Options.AllowDataLoss; either way they are counted (Stats.DataLost).
// The count is of offsets, so a transaction marker among them counts.
func (p *Pipeline) checkDataLoss(ctx context.Context, adm *admClient) error {
	lost, where, err := p.lostRecords(ctx, adm, false)
	if err != nil || lost == 0 {
		return err
	}
	// Confirm against the stable offsets: a predecessor's open
	// transaction may commit offsets past the gap (or abort). Only a
	// suspected loss waits for it, so a restart after a kill -9 does not.
	if lost, where, err = p.lostRecords(ctx, adm, true); err != nil || lost == 0 {
		return err
	}
	topic := p.opts.Source.Topic
	p.c.dataLost.Add(lost)
	msg := fmt.Sprintf("%d records of source topic %s were deleted (retention or DeleteRecords) after the query's last commit and before it read them: %s",
		lost, topic, strings.Join(where, "; "))
	if !p.opts.AllowDataLoss {
		return fmt.Errorf("%w: %s. Nothing was read. To go on from the oldest record left, run with --allow-data-loss (Options.AllowDataLoss); the windows those records fell in will be wrong", ErrDataLoss, msg)
	}
	p.log.Warn("kafka: going on without records deleted before the query read them (--allow-data-loss)", "lost", lost, "detail", msg)
	return nil
}

// lostRecords compares the source group's committed offsets (stable: once
// no transaction of the group is pending, waiting up to the transaction
// timeout and a minute) with the log start offsets.
func (p *Pipeline) lostRecords(ctx context.Context, adm *admClient, stable bool) (int64, []string, error) {
	topic, group := p.opts.Source.Topic, p.inGroup()
	var committed kadm.OffsetResponses
	var err error
	deadline := time.Now().Add(p.opts.TransactionTimeout + time.Minute)
	for {
		fctx := ctx
		if stable {
			fctx = kadm.RequireStable(ctx)
		}
		committed, err = adm.FetchOffsetsForTopics(fctx, group, topic)
		if !errors.Is(err, kerr.UnstableOffsetCommit) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return 0, nil, nil // a new query: nothing committed
	}
	if err != nil {
		return 0, nil, fmt.Errorf("kafka: committed offsets of group %s: %w", group, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, nil, fmt.Errorf("kafka: start offsets of %s: %w", topic, err)
	}
	var lost int64
	var where []string
	for part := int32(0); part < int32(p.nSource); part++ {
		c, ok := committed.Lookup(topic, part)
		if !ok || c.Err != nil || c.At < 0 {
			continue // nothing committed: the run starts where --from says
		}
		p.resumed = true
		s, ok := starts.Lookup(topic, part)
		if !ok || s.Err != nil {
			return 0, nil, fmt.Errorf("kafka: start offset of %s partition %d: %v", topic, part, s.Err)
		}
		if gap := s.Offset - c.At; gap > 0 {
			lost += gap
			where = append(where, fmt.Sprintf("partition %d: offsets %d to %d (%d records)", part, c.At, s.Offset-1, gap))
		}
	}
	slices.Sort(where)
	return lost, where, nil
}
