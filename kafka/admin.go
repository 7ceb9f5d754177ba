package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// admClient is an admin client plus the raw client under it.
type admClient struct {
	*kadm.Client
	cl *kgo.Client
}

// topicPartitions returns the partition count of an existing topic, or 0
// when it does not exist. It asks a broker directly: kadm's metadata is
// cached for seconds, which hides a topic another instance just created.
func topicPartitions(ctx context.Context, adm *admClient, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, adm.cl)
	if err != nil {
		return 0, fmt.Errorf("kafka: metadata of topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		err := kerr.ErrorForCode(t.ErrorCode)
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("kafka: metadata of topic %s: %w", topic, err)
		}
		return len(t.Partitions), nil
	}
	return 0, nil
}

// cleanupPolicy returns the topic's cleanup.policy.
func cleanupPolicy(ctx context.Context, adm *admClient, topic string) (string, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("kafka: describing configs of topic %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return "", fmt.Errorf("kafka: describing configs of topic %s: %w", topic, err)
	}
	if rc.Err != nil {
		return "", fmt.Errorf("kafka: describing configs of topic %s: %w", topic, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			return c.MaybeValue(), nil
		}
	}
	return "delete", nil // the broker default when the topic does not override it
}

// isCompactOnly reports whether a cleanup.policy keeps the latest value of
// every key forever. "compact,delete" also deletes by retention, so a new
// consumer could not rebuild every key from it.
func isCompactOnly(policy string) bool {
	return strings.TrimSpace(strings.ToLower(policy)) == "compact"
}

// createTopic creates a topic, tolerating a concurrent creation by another
// instance (the caller re-checks the layout afterwards).
func createTopic(ctx context.Context, adm *admClient, topic string, partitions int, compact bool) (created bool, err error) {
	configs := map[string]*string{}
	if compact {
		configs["cleanup.policy"] = kadm.StringPtr("compact")
	}
	resp, err := adm.CreateTopic(ctx, int32(partitions), -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return false, fmt.Errorf("kafka: creating topic %s (%d partitions): %w", topic, partitions, err)
	}
	// Another instance created it first: wait until its metadata shows.
	for i := 0; ; i++ {
		n, err := topicPartitions(ctx, adm, topic)
		if err != nil {
			return false, err
		}
		if n > 0 {
			return false, nil
		}
		if i == 100 {
			return false, fmt.Errorf("kafka: topic %s exists but its metadata did not appear within 10s", topic)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ensureSinkTopic creates the sink topic compacted when it is missing, and
// refuses (or, with allowUncompacted, warns about) an existing topic whose
// cleanup.policy is not compact: on a deleting topic, a new consumer could
// not rebuild the latest value of every key.
func ensureSinkTopic(ctx context.Context, adm *admClient, topic string, partitions int, allowUncompacted bool, log *slog.Logger) error {
	n, err := topicPartitions(ctx, adm, topic)
	if err != nil {
		return err
	}
	if n == 0 {
		created, err := createTopic(ctx, adm, topic, partitions, true)
		if err != nil {
			return err
		}
		if created {
			log.Info("kafka: created sink topic", "topic", topic, "partitions", partitions, "cleanup.policy", "compact")
		}
	}
	policy, err := cleanupPolicy(ctx, adm, topic)
	if err != nil {
		return err
	}
	if !isCompactOnly(policy) {
		if !allowUncompacted {
			return fmt.Errorf("%w: topic %s has cleanup.policy=%s; the changelog is an upsert stream and needs cleanup.policy=compact so a new consumer rebuilds the latest value per key (alter the topic, or pass --allow-uncompacted-sink to run anyway)", ErrNotCompacted, topic, policy)
		}
		log.Warn("kafka: sink topic is not compacted; a new consumer cannot rebuild the latest value of every key", "topic", topic, "cleanup.policy", policy)
	}
	return nil
}

// ensureInternalTopic creates (or checks) an internal topic with exactly
// partitions partitions: the repartition topic (delete policy) or the state
// topic (compact). A wrong partition count is an error, because state and
// keys are bound to partition numbers.
func ensureInternalTopic(ctx context.Context, adm *admClient, topic string, partitions int, compact bool, log *slog.Logger) error {
	n, err := topicPartitions(ctx, adm, topic)
	if err != nil {
		return err
	}
	if n == 0 {
		created, err := createTopic(ctx, adm, topic, partitions, compact)
		if err != nil {
			return err
		}
		if created {
			log.Info("kafka: created internal topic", "topic", topic, "partitions", partitions, "compact", compact)
			return nil
		}
		if n, err = topicPartitions(ctx, adm, topic); err != nil {
			return err
		}
	}
	if n != partitions {
		return fmt.Errorf("%w: internal topic %s has %d partitions, the query needs %d (it was created for another layout: delete it, or restore the old partition count)", ErrTopicMismatch, topic, n, partitions)
	}
	if compact {
		policy, err := cleanupPolicy(ctx, adm, topic)
		if err != nil {
			return err
		}
		if !isCompactOnly(policy) {
			return fmt.Errorf("%w: state topic %s has cleanup.policy=%s; it must be compact or state would be lost to retention", ErrNotCompacted, topic, policy)
		}
	}
	return nil
}
