package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sourceWatchEvery is how often a pipeline that reads the source asks the
// broker for the source topic's metadata while it runs.
const sourceWatchEvery = time.Second

// topicMeta is what the pipeline watches of its source topic.
type topicMeta struct {
	exists     bool
	id         [16]byte
	partitions int
}

// describeTopic returns topic's metadata (exists false if it does not exist).
func describeTopic(ctx context.Context, adm *admClient, topic string) (topicMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, adm.cl)
	if err != nil {
		return topicMeta{}, fmt.Errorf("kafka: metadata of topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		err := kerr.ErrorForCode(t.ErrorCode)
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return topicMeta{}, nil
		}
		if err != nil {
			return topicMeta{}, fmt.Errorf("kafka: metadata of topic %s: %w", topic, err)
		}
		return topicMeta{exists: true, id: t.TopicID, partitions: len(t.Partitions)}, nil
	}
	return topicMeta{}, nil
}

// halt holds the reason a pipeline must stop without committing again
// (the source changed under it); nil while it may go on.
type halt struct{ err atomic.Pointer[error] }

func (h *halt) set(err error) { h.err.CompareAndSwap(nil, &err) }

// get returns the reason to stop, or nil.
func (h *halt) get() error {
	if e := h.err.Load(); e != nil {
		return *e
	}
	return nil
}

// watchSource checks the source topic every sourceWatchEvery until ctx
// ends. A change the pipeline cannot follow halts it (p.stop): the
// stages abort their open transaction instead of committing it, and
// return the reason, so no watermark passes a partition the pipeline has
// not read and nothing read after the change is committed.
//   - Partitions added: a partition the stages do not read would not hold
//     the watermark back, and windows would finalize without its events.
//   - The topic deleted, or deleted and created again (a new topic id):
//     the committed offsets belong to the old topic.
//
// A failed request is not a change (an outage is the stages' to ride out).
func (p *Pipeline) watchSource(ctx context.Context) {
	if p.sourceMeta.partitions == 0 {
		return // not recorded (a pipeline that does not read the source)
	}
	adm, closeAdm, err := p.admin()
	if err != nil {
		return
	}
	defer closeAdm()
	t := time.NewTicker(sourceWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		now, err := describeTopic(rctx, adm, p.opts.Source.Topic)
		cancel()
		if err != nil {
			continue
		}
		if err := p.sourceChange(now); err != nil {
			p.log.Error("kafka: the source topic changed under the query: stopping without committing anything read since", "err", err)
			p.stop.set(err)
			return
		}
	}
}

// sourceChange describes, as an ErrSourceChanged error, how now differs
// from the source topic the pipeline started with (nil: no change).
func (p *Pipeline) sourceChange(now topicMeta) error {
	was, topic := p.sourceMeta, p.opts.Source.Topic
	restart := "restart the query: it reads the new topic from where --from says"
	switch {
	case !now.exists:
		return fmt.Errorf("%w: source topic %s was deleted while the query ran; once it exists again, %s", ErrSourceChanged, topic, restart)
	case now.id != was.id && was.id != [16]byte{}:
		return fmt.Errorf("%w: source topic %s was deleted and created again while the query ran (topic id %x, now %x): the committed offsets were the old topic's; %s",
			ErrSourceChanged, topic, was.id, now.id, restart)
	case now.partitions != was.partitions && p.direct:
		return fmt.Errorf("%w: source topic %s went from %d to %d partitions while the query ran. The query reads it as partitioned by the GROUP BY key (--partitioned-by-key), and a producer now puts keys on other partitions, so one group would be split over two. "+
			"Run the query without --partitioned-by-key (ubik then repartitions by the key itself), or write the data again into a topic partitioned by key and run over it with --reset-state",
			ErrSourceChanged, topic, was.partitions, now.partitions)
	case now.partitions != was.partitions:
		return fmt.Errorf("%w: source topic %s went from %d to %d partitions while the query ran; the query stopped before its watermark could pass a partition it had not read. "+
			"Restart the query: it reads all %d partitions (the new ones from their start) and resumes the others from its committed offsets",
			ErrSourceChanged, topic, was.partitions, now.partitions, now.partitions)
	}
	return nil
}
