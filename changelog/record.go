// Package changelog holds the one encoder of ubik's frozen key contract and
// the Record type every producer (engine, Kafka sink, C ABI) and every
// consumer (landers) shares.
//
// The key of a record is a JSON array of the GROUP BY values in GROUP BY
// order, rendered exactly as Python 3's json.dumps prints it over cells cast
// to text the way DuckDB casts them. The value is the projected row as one
// JSON object. docs/contract.md pins the bytes; testdata/contract holds the
// golden vectors. Nothing else in the project may produce key or value bytes.
package changelog

// Record is one changelog entry: an upsert of the whole current value of one
// (group, window). ubik never produces a record without a value.
type Record struct {
	Key   []byte // frozen-contract key bytes: JSON array of GROUP BY cells
	Value []byte // projected row as one JSON object
	Meta  Meta
}

// Meta is the metadata carried beside the key and the value (in Kafka record
// headers, in the jsonl envelope, in the C ABI out-parameters).
type Meta struct {
	// Query is the name of the query that produced the record.
	Query string
	// Final is the settlement marker: no further record for this key will
	// follow (the window closed). Always false for a continuous view.
	Final bool
	// Revision counts the emissions of this (group, window), from 1.
	Revision uint64
	// Windowed reports whether the query has a window; WindowStart and
	// WindowEnd are meaningful only then.
	Windowed bool
	// WindowStart and WindowEnd are microseconds since the Unix epoch.
	WindowStart int64
	WindowEnd   int64
	// WindowPositions are the indexes, in the key array, of the cells that
	// hold the window (the window start). Empty for a continuous view.
	WindowPositions []int
}

// Clone returns a deep copy of r whose byte slices do not alias r's.
func (r Record) Clone() Record {
	c := r
	c.Key = append([]byte(nil), r.Key...)
	c.Value = append([]byte(nil), r.Value...)
	c.Meta.WindowPositions = append([]int(nil), r.Meta.WindowPositions...)
	return c
}
