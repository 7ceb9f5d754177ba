package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// restoreQueries are the shapes FuzzRestore restores into: each kind of
// window, growing and boxed aggregates, and input dedup.
var restoreQueries = []string{
	`SELECT merchant, count(*), sum(amount), avg(amount), max(customer) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' SECOND)`,
	`SELECT merchant, count(DISTINCT customer), min(amount), stddev_samp(amount) FROM events GROUP BY merchant, HOP(event_time, INTERVAL '1' SECOND, INTERVAL '3' SECOND)`,
	`SELECT merchant, count(*), sum(amount) FROM events GROUP BY merchant, SESSION(event_time, INTERVAL '1' SECOND)`,
	`SELECT customer, count(*), approx_count_distinct(merchant), bool_or(amount > 100) FROM events GROUP BY customer`,
}

const restoreDedupSource = `CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount DOUBLE, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND) WITH (format = 'jsonl', dedup_key = 'event_id', dedup_within = '10 seconds');`

// dedupped is an operator behind its query's input dedup, as
// internal/drive runs one: the dedup's entries come between the groups'
// and the meta entry.
type dedupped struct {
	*Operator
	d *Dedup // nil without a dedup_key
}

func (x *dedupped) Process(row []types.Value) error {
	if x.d == nil {
		return x.Operator.Process(row)
	}
	before := x.d.Bytes()
	dup, beyond := x.d.Admit(row, x.Watermark())
	x.AddStateBytes(x.d.Bytes() - before)
	if dup || beyond {
		return x.Skip(row, dup)
	}
	return x.Operator.Process(row)
}

func (x *dedupped) Restore(key, val []byte) ([]byte, error) {
	if x.d != nil && x.d.IsEntry(key) {
		return nil, x.d.Restore(key, val)
	}
	return x.Operator.Restore(key, val)
}

func (x *dedupped) Checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	return x.Operator.Checkpoint(full, position, func(k, v []byte) error {
		if x.d != nil && string(k) == MetaKey {
			if err := x.d.Checkpoint(full, put); err != nil {
				return err
			}
		}
		return put(k, v)
	})
}

func restoreOperator(t testing.TB, qi int) *dedupped {
	src := benchSource
	if qi%2 == 1 {
		src = restoreDedupSource
	}
	prog, err := plan.Compile(src+restoreQueries[qi%len(restoreQueries)], plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[0]
	x := &dedupped{d: NewDedup(q)}
	cfg := Config{Emit: func(*changelog.Record) error { return nil }, Nanotime: func() int64 { return 1 }}
	if x.d != nil {
		cfg.OnAdvance = func(wm int64) int64 {
			before := x.d.Bytes()
			x.d.Evict(wm)
			return x.d.Bytes() - before
		}
	}
	op, err := New(NoDedup(q), cfg)
	if err != nil {
		t.Fatal(err)
	}
	x.Operator = op
	return x
}

// encodeEntries writes entries as the CLI's checkpoint file does: key and
// value lengths (uvarint), then their bytes; an empty value deletes.
func encodeEntries(op *dedupped, full bool) []byte {
	var b []byte
	if err := op.Checkpoint(full, []byte("pos"), func(k, v []byte) error {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(append(b, k...), v...)
		return nil
	}); err != nil {
		panic(err)
	}
	return b
}

// decodeEntries reads encodeEntries' format; ok is false for a blob that
// is not a sequence of whole entries.
func decodeEntries(b []byte) (keys, vals [][]byte, ok bool) {
	for len(b) > 0 {
		kl, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, nil, false
		}
		b = b[n:]
		vl, n := binary.Uvarint(b)
		if n <= 0 || kl > uint64(len(b)) || vl > uint64(len(b)) || kl+vl > uint64(len(b)-n) {
			return nil, nil, false
		}
		b = b[n:]
		keys, vals = append(keys, b[:kl]), append(vals, b[kl:kl+vl])
		b = b[kl+vl:]
	}
	return keys, vals, true
}

// restoreSeeds are real checkpoints: each query after a history of events
// (full, then incremental after more events).
func restoreSeeds(t testing.TB) (qis []int, blobs [][]byte) {
	for qi := range restoreQueries {
		for _, dedup := range []int{0, 1} {
			op := restoreOperator(t, qi+dedup*len(restoreQueries))
			row := make([]types.Value, 5)
			for i := 0; i < 60; i++ {
				row[0] = types.Str(fmt.Sprintf("e%d", i%50))
				row[1] = types.Str(fmt.Sprintf("m%d", i%4))
				row[2] = types.Str(fmt.Sprintf("c%d", i%7))
				row[3] = types.Float(float64(i%13) * 17.5)
				row[4] = types.TS(36000000000 + int64(i)*400000)
				if err := op.Process(row); err != nil {
					t.Fatal(err)
				}
				if i == 30 {
					qis, blobs = append(qis, qi+dedup*len(restoreQueries)), append(blobs, encodeEntries(op, true))
				}
			}
			qis, blobs = append(qis, qi+dedup*len(restoreQueries)), append(blobs, encodeEntries(op, false))
			qis, blobs = append(qis, qi+dedup*len(restoreQueries)), append(blobs, encodeEntries(op, true))
		}
	}
	return qis, blobs
}

// FuzzRestore: whatever a checkpoint holds, restoring it never panics, and
// it either fails with a clean error or gives a state whose full
// checkpoint is exactly the entries restored.
func FuzzRestore(f *testing.F) {
	qis, blobs := restoreSeeds(f)
	for i := range qis {
		f.Add(uint8(qis[i]), blobs[i])
	}
	f.Fuzz(func(t *testing.T, qi uint8, blob []byte) {
		keys, vals, ok := decodeEntries(blob)
		if !ok {
			return
		}
		op := restoreOperator(t, int(qi)%(2*len(restoreQueries)))
		want := map[string]string{}
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("restore panicked: %v", p)
				}
			}()
			for i := range keys {
				if _, err := op.Restore(keys[i], vals[i]); err != nil {
					return err
				}
				if len(vals[i]) == 0 {
					delete(want, string(keys[i]))
				} else {
					want[string(keys[i])] = string(vals[i])
				}
			}
			op.FinishRestore()
			return nil
		}()
		if err != nil {
			return
		}
		got := map[string]string{}
		if err := op.Checkpoint(true, []byte("pos"), func(k, v []byte) error {
			got[string(k)] = string(v)
			return nil
		}); err != nil {
			t.Fatalf("checkpoint of the restored state: %v", err)
		}
		if _, ok := want[MetaKey]; !ok {
			delete(got, MetaKey) // always written; a restore may lack it
		}
		if !maps.Equal(got, want) {
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("entry %q restored as %x, re-checkpointed as %x", k, v, got[k])
				}
			}
			for k, v := range got {
				if _, ok := want[k]; !ok {
					t.Fatalf("entry %q (%x) re-checkpointed, not restored", k, v)
				}
			}
		}
	})
}

// A crafted checkpoint whose every entry reads is refused when an entry is
// not what the operator would write: a group key cut short (it panicked
// when the state was next written), a negative count in the meta entry,
// bytes after a group's state (both were accepted).
func TestRestoreRefusesCraftedEntries(t *testing.T) {
	_, blobs := restoreSeeds(t)
	keys, vals, ok := decodeEntries(blobs[0])
	if !ok {
		t.Fatal("seed does not decode")
	}
	g := -1
	for i, k := range keys {
		if k[0] == 'g' {
			g = i
			break
		}
	}
	meta := len(keys) - 1
	if g < 0 || string(keys[meta]) != MetaKey {
		t.Fatalf("seed has no group entry or does not end with the meta entry")
	}
	negRows := []byte{stateVersion}
	r := &reader{b: vals[meta][1:]}
	negRows = binary.AppendVarint(negRows, r.varint())
	negRows = binary.AppendVarint(negRows, r.varint())
	negRows = binary.AppendUvarint(negRows, r.uvarint())
	r.varint()
	negRows = append(binary.AppendVarint(negRows, -5), r.b...)
	for name, mutate := range map[string]func(k, v [][]byte){
		"group key cut short":  func(k, v [][]byte) { k[g] = k[g][:len(k[g])-1] },
		"negative row count":   func(k, v [][]byte) { v[meta] = negRows },
		"bytes after a group":  func(k, v [][]byte) { v[g] = append(append([]byte(nil), v[g]...), 0) },
		"bytes after the meta": func(k, v [][]byte) { v[meta] = append(append([]byte(nil), v[meta]...), 0) },
	} {
		k, v := append([][]byte(nil), keys...), append([][]byte(nil), vals...)
		mutate(k, v)
		op := restoreOperator(t, 0)
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			for i := range k {
				if _, err = op.Restore(k[i], v[i]); err != nil {
					return
				}
			}
			op.FinishRestore()
			err = op.Checkpoint(true, nil, func(k, v []byte) error { return nil })
		}()
		if err == nil || !errors.Is(err, ErrBadState) {
			t.Errorf("%s: got %v, want an ErrBadState error", name, err)
		}
	}
}
