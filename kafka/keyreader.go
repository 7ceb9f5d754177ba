package kafka

import (
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// KeyReader reads the record key of an event as a query keyed by one of
// its fields groups it, for a producer that partitions a topic by that
// field: the events of one group then go to one partition.
type KeyReader struct {
	str, any *drive.Decoder // any (JSON only): the field's canonical JSON when not a string
}

// NewKeyReader reads field of JSON lines (csv false) or, of CSV with a
// header, the column it names, fields separated by delimiter.
func NewKeyReader(field string, csv bool, delimiter string) *KeyReader {
	src := func(json bool, opts map[string]string) *drive.Decoder {
		return drive.NewDecoder(&plan.Source{Name: "--input", TimeCol: -1,
			Columns: []plan.Column{{Name: field, Type: types.Varchar, JSON: json}}, Options: opts})
	}
	if csv {
		return &KeyReader{str: src(false, map[string]string{"format": "csv", "header": "true", "delimiter": delimiter})}
	}
	opts := map[string]string{"format": "jsonl"}
	return &KeyReader{str: src(false, opts), any: src(true, opts)}
}

// Header reads a CSV header record and reports whether it names the key:
// the header read again as data yields, in the key column, the header's
// own cell, which is NULL when no field maps to that column. err is the
// header's decoding error.
func (k *KeyReader) Header(header []byte) (named bool, err error) {
	if _, err := k.str.Decode(header); err != nil {
		return false, err
	}
	row, err := k.str.Decode(header)
	return err == nil && !row[0].Null, nil
}

// Key returns the key of event: a string field's text (invalid UTF-8
// repaired, escapes resolved), another JSON value's canonical JSON,
// "null" for NULL (a JSON null, or no such field: the NULL group, one
// partition as every other group is), or nil for an event that cannot be
// read (not JSON).
func (k *KeyReader) Key(event []byte) []byte {
	row, err := k.str.Decode(event)
	switch {
	case err == nil && !row[0].Null:
		return []byte(row[0].S)
	case err == nil:
		return []byte("null")
	case k.any == nil:
		return nil
	}
	if row, err := k.any.Decode(event); err == nil && !row[0].Null {
		return []byte(row[0].S)
	}
	return nil
}
