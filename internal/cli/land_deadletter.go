package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/kafkasrc"
)

// deadLetter appends the records ubik land sets aside to a file, one JSON
// object a line: where the record came from, why it was set aside, and the
// record as it was in Kafka. Each line is synced before the batch holding
// the record commits, so a record leaves the topic's backlog only once it
// is in the file.
type deadLetter struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

func openDeadLetter(path string) (*deadLetter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("land: --dead-letter: %w", err)
	}
	return &deadLetter{f: f, path: path}, nil
}

func (d *deadLetter) Close() error { return d.f.Close() }

// deadLine is one line of the file. Bytes that are not UTF-8 go in the
// _base64 twin of their field, so the file keeps them exactly.
type deadLine struct {
	Topic       string            `json:"topic"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	Reason      string            `json:"reason"`
	Key         *string           `json:"key,omitempty"`
	KeyBase64   *string           `json:"key_base64,omitempty"`
	Value       *string           `json:"value,omitempty"`
	ValueBase64 *string           `json:"value_base64,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
}

func textOrBase64(b []byte) (text, b64 *string) {
	if b == nil {
		return nil, nil
	}
	s := string(b)
	if utf8.ValidString(s) {
		return &s, nil
	}
	e := base64.StdEncoding.EncodeToString(b)
	return nil, &e
}

// Kafka writes one record with its reason.
func (d *deadLetter) Kafka(kr *kgo.Record, reason error) error {
	l := deadLine{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Reason: reason.Error()}
	l.Key, l.KeyBase64 = textOrBase64(kr.Key)
	l.Value, l.ValueBase64 = textOrBase64(kr.Value)
	if len(kr.Headers) > 0 {
		l.Headers = make(map[string]string, len(kr.Headers))
		for _, h := range kr.Headers {
			if !utf8.Valid(h.Value) {
				l.Headers[h.Key+"_base64"] = base64.StdEncoding.EncodeToString(h.Value)
				continue
			}
			l.Headers[h.Key] = string(h.Value)
		}
	}
	line, err := json.Marshal(l)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", d.path, err)
	}
	if err := d.f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", d.path, err)
	}
	return nil
}

// Refused writes a record land.Run set aside (land.RunOptions.OnBadRecord).
func (d *deadLetter) Refused(b land.BadRecord) error {
	kr, ok := kafkasrc.Origin(b.Batch, b.Index)
	if !ok {
		return fmt.Errorf("record %d of a batch has no Kafka origin", b.Index)
	}
	return d.Kafka(kr, b.Err)
}
