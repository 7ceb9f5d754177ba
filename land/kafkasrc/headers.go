// Package kafkasrc is the Kafka land.Source: a consumer group that decodes
// ubik changelog records from Kafka records and commits offsets only after
// the store acknowledged. The record header format itself is
// changelog.AppendHeaders and changelog.DecodeHeaders (shared with the
// engine's Kafka sink); this package adds the Kafka record around it and
// names the topic, partition and offset of a record that does not decode.
package kafkasrc

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/ubiksql/ubik/changelog"
)

// ToKafka returns the Kafka record for r on topic.
func ToKafka(topic string, r changelog.Record) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: changelog.AppendHeaders(make([]kgo.RecordHeader, 0, 6), r.Meta)}
}

// Decode returns the changelog record that kr carries. The returned slices
// alias kr's. Errors are *DecodeError.
func Decode(kr *kgo.Record) (changelog.Record, error) {
	r, err := changelog.DecodeHeaders(kr.Key, kr.Value, kr.Headers)
	if err != nil {
		return changelog.Record{}, &DecodeError{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Err: err}
	}
	return r, nil
}
