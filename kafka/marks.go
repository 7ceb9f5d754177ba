package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// marks is the watermark table of a stage that reads an input topic and
// writes the repartition topic (the repartition stage, the table stage):
// the watermarks of the input partitions it owns, sent to every partition
// of the repartition topic after the records they cover, in the same
// transaction. An aborted transaction rewinds the table to the last
// committed one, so a marker never runs ahead of the records that are
// about to be produced again.
type marks struct {
	wm, committed *tracker
	owned         map[int32]bool
	idle          *idleClock
	// end, with UntilCaughtUp, is how far each owned partition is
	// consumed; the table carries it, so the aggregating stage knows when
	// it has seen the input's end.
	end        *ends
	lastSent   []byte
	lastSentAt time.Time
}

func newMarks(n int, idleTimeout time.Duration, end map[int32]int64) *marks {
	m := &marks{wm: newTracker(n), owned: map[int32]bool{}, idle: newIdleClock(idleTimeout)}
	m.committed = m.wm.clone()
	if end != nil {
		m.end = newEnds(end)
	}
	return m
}

// assign follows the session's partitions: those no longer owned leave
// the table, new ones enter it (a new owner starts from nothing: a
// watermark only moves forward).
func (m *marks) assign(owned map[int32]bool, now time.Time) {
	m.owned = owned
	for part := range m.wm.parts {
		if !owned[part] {
			m.wm.remove(part)
			m.idle.forget(part)
		}
	}
	for part := range owned {
		if _, ok := m.wm.parts[part]; !ok {
			m.wm.get(part)
			m.idle.touch(part, now)
		}
	}
}

// seen records the consumed records of part in a poll, control records
// included (UntilCaughtUp). It reports whether any of them is data.
func (m *marks) seen(part int32, recs []*kgo.Record, now time.Time) bool {
	if m.end != nil {
		m.end.seen(part, recs[len(recs)-1].Offset)
	}
	for _, r := range recs {
		if !r.Attrs.IsControl() {
			m.idle.touch(part, now)
			m.wm.get(part)
			return true
		}
	}
	return false // transaction markers only (kept for UntilCaughtUp)
}

// settle sets every partition's idle flag and, with UntilCaughtUp, how
// far it is consumed: the marker follows every record before that
// position, in this transaction.
func (m *marks) settle(now time.Time) {
	for part := range m.wm.parts {
		m.wm.setIdle(part, m.idle.idle(part, now))
		if m.end != nil && m.owned[part] {
			if pos, ok := m.end.position(part); ok {
				m.wm.setPos(part, pos)
			}
		}
	}
}

// due returns the encoded table when a marker is due: it changed since
// the last one, or markerEvery passed.
func (m *marks) due(now time.Time) ([]byte, bool) {
	if len(m.wm.parts) == 0 {
		return nil, false
	}
	enc := m.wm.appendTo(nil)
	if string(enc) == string(m.lastSent) && now.Sub(m.lastSentAt) < markerEvery {
		return nil, false
	}
	m.lastSent, m.lastSentAt = enc, now
	return enc, true
}

// ended keeps the table of a committed transaction, or rewinds to the
// last committed one.
func (m *marks) ended(committed bool) {
	if m.end != nil {
		if committed {
			m.end.commit()
		} else {
			m.end.abort()
		}
	}
	if committed {
		m.committed = m.wm.clone()
		return
	}
	m.wm = m.committed.clone()
	for part := range m.wm.parts {
		if !m.owned[part] {
			m.wm.remove(part)
		}
	}
	m.lastSent = nil
}

// sendMarksTo produces a watermark marker of input in (key and header
// name it a marker) to every partition of topic, of as many partitions as
// the repartition topic (the dedup topic's are its).
func (p *Pipeline) sendMarksTo(tx *txn, topic string, key []byte, header, in string, enc []byte) {
	p.sendMarks(tx, topic, p.nParts, key, header, in, enc)
}

// sendMarks is sendMarksTo for a topic of n partitions.
func (p *Pipeline) sendMarks(tx *txn, topic string, n int, key []byte, header, in string, enc []byte) {
	hs := []kgo.RecordHeader{{Key: header, Value: []byte{1}}, inTag(in)}
	for i := 0; i < n; i++ {
		tx.produce(&kgo.Record{Topic: topic, Partition: int32(i), Key: key, Value: enc, Headers: hs})
		p.c.markersOut.Add(1)
	}
}
