package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
	topic, group := p.opts.Source.Topic, p.inGroup()
	committed, err := adm.FetchOffsetsForTopics(kadm.RequireStable(ctx), group, topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil // a new query: nothing committed
	}
	if err != nil {
		return fmt.Errorf("kafka: committed offsets of group %s: %w", group, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("kafka: start offsets of %s: %w", topic, err)
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
			return fmt.Errorf("kafka: start offset of %s partition %d: %v", topic, part, s.Err)
		}
		if gap := s.Offset - c.At; gap > 0 {
			lost += gap
			where = append(where, fmt.Sprintf("partition %d: offsets %d to %d (%d records)", part, c.At, s.Offset-1, gap))
		}
	}
	if lost == 0 {
		return nil
	}
	slices.Sort(where)
	p.c.dataLost.Add(lost)
	msg := fmt.Sprintf("%d records of source topic %s were deleted (retention or DeleteRecords) after the query's last commit and before it read them: %s",
		lost, topic, strings.Join(where, "; "))
	if !p.opts.AllowDataLoss {
		return fmt.Errorf("%w: %s. Nothing was read. To go on from the oldest record left, run with --allow-data-loss (Options.AllowDataLoss); the windows those records fell in will be wrong", ErrDataLoss, msg)
	}
	p.log.Warn("kafka: going on without records deleted before the query read them (--allow-data-loss)", "lost", lost, "detail", msg)
	return nil
}
