package kafka

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/ubiksql/ubik/internal/drive"
)

// The aggregating stage's state: each transaction's changed entries of
// the tasks it touched, and a task's restore from its partition of the
// state topic.

// checkpoint writes the changed state entries of every touched operator to
// its state-topic partition, in the open transaction.
func (st *stage2) checkpoint() error {
	p := st.p
	// Publish the owned operators' gauges for Stats (this goroutine is the
	// only one that touches the operators).
	var live, bytes, dups, dlate, dkeys, dbytes, unchanged int64
	for _, t := range st.tasks {
		for _, s := range t.g.NodeStats() {
			live, bytes, dups, dlate, dkeys, dbytes = live+s.LiveGroups, bytes+s.StateBytes, dups+s.Duplicates,
				dlate+s.DedupLate, dkeys+s.DedupKeys, dbytes+s.DedupBytes
			unchanged += s.UnchangedSuppressed
		}
		if t.dd != nil {
			d, l, k, b := t.dd.Stats()
			dups, dlate, dkeys, dbytes, bytes = dups+d, dlate+l, dkeys+k, dbytes+b, bytes+b
		}
	}
	p.c.unchanged.Store(unchanged)
	p.c.liveGroups.Store(live)
	p.c.stateBytes.Store(bytes)
	if !p.dedup { // else the dedup stage's
		p.c.dedup.store(dups, dlate, dkeys, dbytes)
	}
	if p.tj != nil {
		st.publishJoin()
	}
	for _, t := range st.tasks {
		if !t.touched {
			continue
		}
		t.touched = false
		marks := t.marks
		if p.direct {
			src := newTracker(0) // the partition's own watermark
			if pw, ok := st.local.parts[t.part]; ok {
				src.observe(t.part, pw.wm)
			}
			marks = append([]*tracker{src}, marks[1:]...)
		}
		pos := appendPosition(nil, marks)
		put := func(k, v []byte) error {
			// Key and value in one slice of the arena's: 4 bytes of
			// partition, the entry key, the value (a nil v is a tombstone).
			kv := binary.BigEndian.AppendUint32(st.tx.out.bytes(4+len(k)+len(v)), uint32(t.part))
			kv = append(kv, k...)
			rec := st.tx.out.record()
			rec.Topic, rec.Partition, rec.Key = p.stateTopic, t.part, kv[:len(kv):len(kv)]
			if v != nil {
				rec.Value = append(kv[len(kv):len(kv):cap(kv)], v...)
			}
			st.tx.produce(rec)
			p.c.stateOut.Add(1)
			return nil
		}
		if err := checkpointDedup(t, put); err != nil {
			return err
		}
		if err := t.g.Checkpoint(false, pos, put); err != nil {
			return err
		}
	}
	return nil
}

// stateKey scopes an operator's entry key by its partition: 4 bytes of
// partition number, then the entry key.
func stateKey(part int32, k []byte) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(k)), uint32(part))
	return append(b, k...)
}

// load restores one operator from its partition's latest entries.
func (p *Pipeline) load(t *task, entries map[string][]byte) error {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	metaKey := string(t.g.MetaKey())
	if _, ok := entries[string(stateKey(t.part, []byte(metaKey)))]; !ok && len(entries) > 0 {
		// Every transaction that writes entries writes the meta entry
		// too, and compaction keeps its latest value: entries without it
		// mean the topic lost records (the watermark table with them).
		return fmt.Errorf("%w: state topic %s partition %d holds %d entries but no meta entry (watermarks, counters): records were lost from the topic", drive.ErrBadState, p.stateTopic, t.part, len(entries))
	}
	var meta []byte
	for _, k := range keys {
		if len(k) < 4 || int32(binary.BigEndian.Uint32([]byte(k[:4]))) != t.part {
			return fmt.Errorf("%w: state topic %s partition %d holds an entry of another partition", drive.ErrBadState, p.stateTopic, t.part)
		}
		ek := []byte(k[4:])
		if ok, err := restoreDedup(t, ek, entries[k]); ok || err != nil {
			if err != nil {
				return fmt.Errorf("state topic %s partition %d: %w", p.stateTopic, t.part, err)
			}
			continue
		}
		if string(ek) == metaKey {
			meta = entries[k]
			continue
		}
		if _, err := t.g.Restore(ek, entries[k]); err != nil {
			return fmt.Errorf("state topic %s partition %d: %w", p.stateTopic, t.part, err)
		}
	}
	if meta != nil {
		pos, err := t.g.Restore([]byte(metaKey), meta)
		if err != nil {
			return fmt.Errorf("state topic %s partition %d: %w", p.stateTopic, t.part, err)
		}
		parts := p.inputParts()
		marks, err := splitPosition(pos, len(parts))
		if err != nil {
			return fmt.Errorf("state topic %s partition %d: %w", p.stateTopic, t.part, err)
		}
		if err := p.finiteWatermarks(t, marks[0]); err != nil {
			return err
		}
		for in, n := range parts {
			t.marks[in] = marks[in]
			if in == 0 && p.direct {
				t.marks[0] = newTracker(n)
				t.marks[0].merge(marks[0]) // the partition's own watermark; merged into the instance's below
			}
			t.marks[in].n = max(t.marks[in].n, n)
		}
	}
	if err := t.g.FinishRestore(); err != nil {
		return err
	}
	p.c.restoredEntries.Add(int64(len(entries)))
	return nil
}
