package kafka

import (
	"slices"
	"time"
)

// publishSourceParts records, for Stats, which of the source partitions
// this process reads are idle (quiet for the idle timeout: they no longer
// hold the watermark back) and which delivered no event in this run and
// are not idle yet (they hold it back until the idle timeout passes).
// The stage that reads the source calls it after each poll.
func (p *Pipeline) publishSourceParts(owned, seen map[int32]bool, idle *idleClock, now time.Time) {
	var idleP, silent []int32
	for part := range owned {
		switch {
		case idle.idle(part, now):
			idleP = append(idleP, part)
		case !seen[part]:
			silent = append(silent, part)
		}
	}
	slices.Sort(idleP)
	slices.Sort(silent)
	p.partMu.Lock()
	p.idleParts, p.silentParts = idleP, silent
	p.partMu.Unlock()
}

func (p *Pipeline) sourceParts() (idle, silent []int32) {
	p.partMu.Lock()
	defer p.partMu.Unlock()
	return slices.Clone(p.idleParts), slices.Clone(p.silentParts)
}
