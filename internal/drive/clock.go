package drive

import (
	_ "unsafe" // go:linkname
)

// nanotime is the runtime's monotonic clock, the reading time.Now carries
// for Sub. The operator stamps every group an event makes dirty with the
// clock (emission latency); at millions of new groups time.Now, which
// reads the wall clock too, was about 5% of the CPU. The runtime keeps
// this symbol linkable for such uses.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// nanotime returns the operator's clock: nanoseconds since the driver
// started, plus one (0 means "not read"). A host's own Config.Now (tests'
// fake clocks) is read through; the real clock is the runtime's monotonic
// reading, the same one d.now().Sub(d.start) would give.
func (d *Driver) nanotime(hostClock bool) func() int64 {
	if hostClock {
		return func() int64 { return int64(d.now().Sub(d.start)) + 1 }
	}
	base := d.startMono
	return func() int64 { return nanotime() - base + 1 }
}
