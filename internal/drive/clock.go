package drive

import (
	"reflect"
	"time"
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
// fake clocks) is read through; time.Now, the default, is read as the
// runtime's monotonic reading, the same one d.now().Sub(d.start) gives.
func (d *Driver) nanotime() func() int64 {
	if !isTimeNow(d.now) {
		return func() int64 { return int64(d.now().Sub(d.start)) + 1 }
	}
	base := d.startMono
	return func() int64 { return nanotime() - base + 1 }
}

// isTimeNow reports whether now is time.Now itself (func values compare
// only through their code pointers).
func isTimeNow(now func() time.Time) bool {
	return reflect.ValueOf(now).Pointer() == reflect.ValueOf(time.Now).Pointer()
}
