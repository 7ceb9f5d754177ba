package kafkasrc

// This file holds the package's sentinel error values and its error types.

import (
	"errors"
	"fmt"
)

// ErrBadRecord is wrapped by every decoding error.
var ErrBadRecord = errors.New("kafkasrc: bad record")

// DecodeError is a Kafka record that is not a ubik changelog record.
type DecodeError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("kafkasrc: topic %s partition %d offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap returns both the cause and ErrBadRecord.
func (e *DecodeError) Unwrap() []error { return []error{ErrBadRecord, e.Err} }
