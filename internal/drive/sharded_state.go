package drive

import (
	"hash/maphash"
	"math"

	"github.com/ubiksql/ubik/internal/exec"
)

// A sharded aggregate's counters, checkpoint and restore: one meta entry
// for all the shards, each group's entries in the shard its key hashes to
// (so a checkpoint restores into any number of shards).

func (p *par) stats() exec.Stats {
	var s exec.Stats
	for _, t := range p.lastStats {
		s.Rows += t.Rows
		s.Filtered += t.Filtered
		s.EvalErrors += t.EvalErrors
		s.Late += t.Late
		s.Duplicates += t.Duplicates // restored counters
		s.DedupLate += t.DedupLate
		s.RecordsOut += t.RecordsOut
		s.HavingSuppressed += t.HavingSuppressed
		s.UnchangedSuppressed += t.UnchangedSuppressed
		s.WindowsFinalized += t.WindowsFinalized
		s.LiveGroups += t.LiveGroups
		s.LiveGroupsPeak += t.LiveGroupsPeak
		s.StateBytes += t.StateBytes
		s.StateBytesPeak += t.StateBytesPeak
		s.LatencyP50 = max(s.LatencyP50, t.LatencyP50)
		s.LatencyP99 = max(s.LatencyP99, t.LatencyP99)
		s.LatencyMax = max(s.LatencyMax, t.LatencyMax)
		s.LatencyCount += t.LatencyCount
	}
	s.Rows += p.filtered + p.evalErrs + p.dedup.dropped() // the shards count the rows routed to them
	s.Filtered += p.filtered
	s.EvalErrors += p.evalErrs
	if p.dedup != nil {
		p.dedup.addStats(&s)
		// The dedup keys are live state too; the peak, like the shards'
		// sum, bounds the real one from above.
		s.StateBytes += s.DedupBytes
		s.StateBytesPeak += p.dedup.st.Peak()
	}
	s.Watermark = p.wm
	s.MaxEventTime = p.maxTime
	return s
}

// checkpoint writes every shard's entries and one meta entry.
func (p *par) checkpoint(full bool, position []byte, put func(key, val []byte) error) error {
	if err := p.sync(); err != nil {
		return err
	}
	m := exec.Meta{Watermark: p.wm, MaxEventTime: p.maxTime, Position: position}
	for _, s := range p.shards {
		err := s.op.Checkpoint(full, nil, func(k, v []byte) error {
			if string(k) != exec.MetaKey {
				return put(k, v)
			}
			sm, err := exec.ParseMeta(v)
			if err != nil {
				return err
			}
			m.Seq = max(m.Seq, sm.Seq)
			for i, c := range sm.Counters {
				m.Counters[i] += c
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if p.dedup != nil {
		if err := p.dedup.checkpoint(full, put); err != nil {
			return err
		}
		p.dedup.addMeta(&m)
	}
	m.Counters[0] += p.filtered + p.evalErrs + p.dedup.dropped() // Rows: the shards count only the rows routed to them
	m.Counters[1] += p.filtered
	m.Counters[2] += p.evalErrs
	m.Seq = max(m.Seq, p.seqBase+p.op*p.perEvent)
	return put([]byte(exec.MetaKey), exec.AppendMeta(nil, m))
}

// restore routes one checkpoint entry to the shard that holds its group
// (the meta entry to all: its counters to the first only).
func (p *par) restore(key, val []byte) ([]byte, error) {
	if string(key) == exec.MetaKey && len(val) > 0 {
		m, err := exec.ParseMeta(val)
		if err != nil {
			return nil, err
		}
		p.wm, p.outWM, p.maxTime = m.Watermark, m.Watermark, m.MaxEventTime
		z := m
		z.Counters = [exec.MetaCounters]int64{}
		z.Position = nil
		for i, s := range p.shards {
			mv := exec.AppendMeta(nil, z)
			if i == 0 {
				mv = val
			}
			if _, err := s.op.Restore(key, mv); err != nil {
				return nil, err
			}
		}
		return m.Position, nil
	}
	if p.dedup != nil && p.dedup.isEntry(key) {
		return nil, p.dedup.restore(key, val)
	}
	s := p.shards[0]
	if gk, ok := exec.EntryGroupKey(key); ok {
		s = p.shards[maphash.Bytes(p.seed, gk)%uint64(len(p.shards))]
	}
	return s.op.Restore(key, val)
}

func (p *par) finishRestore() {
	p.lastMark = math.MinInt64 // the host's readers start without a marker
	for i, s := range p.shards {
		s.op.FinishRestore()
		p.seqBase = max(p.seqBase, s.op.Seq()+1)
		s.tags = s.tags[:0]
		for range s.op.DirtyLen() {
			s.tags = append(s.tags, 0)
		}
		p.lastStats[i] = s.op.Stats()
	}
}
