package drive

import (
	"testing"
	"time"
)

func TestIsTimeNow(t *testing.T) {
	if !isTimeNow(time.Now) {
		t.Fatal("time.Now not recognised")
	}
	fake := func() time.Time { return time.Unix(0, 0) }
	if isTimeNow(fake) {
		t.Fatal("a fake clock taken for time.Now")
	}
}

// TestNanotimeMatchesTimeNow holds the runtime clock to the reading of
// time.Now the operator used before: both count from the driver's start.
func TestNanotimeMatchesTimeNow(t *testing.T) {
	d := &Driver{now: time.Now}
	d.start = d.now()
	d.startMono = nanotime()
	fast := d.nanotime()
	for range 100 {
		before := int64(time.Since(d.start)) + 1
		got := fast()
		after := int64(time.Since(d.start)) + 1
		if got < before-int64(time.Millisecond) || got > after+int64(time.Millisecond) {
			t.Fatalf("nanotime %d outside [%d, %d]", got, before, after)
		}
	}
	var fakeNow time.Time
	d2 := &Driver{now: func() time.Time { return fakeNow }}
	fakeNow = time.Unix(100, 0)
	d2.start = d2.now()
	slow := d2.nanotime()
	fakeNow = fakeNow.Add(5 * time.Second)
	if got := slow(); got != int64(5*time.Second)+1 {
		t.Fatalf("fake clock read %d, want %d", got, int64(5*time.Second)+1)
	}
}
