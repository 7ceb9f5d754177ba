package kafka

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The arena's slices never share room: filling each to the size asked
// leaves every other one as it was, whatever the sizes (some past a
// chunk), and every record is a new one.
func TestOutArenaDisjoint(t *testing.T) {
	var a outArena
	var got [][]byte
	for i := 0; i < 2000; i++ {
		n := i % 97
		if i%500 == 7 {
			n = arenaBytes // its own allocation
		}
		b := a.bytes(n)
		if len(b) != 0 || cap(b) != n {
			t.Fatalf("bytes(%d): len %d cap %d", n, len(b), cap(b))
		}
		got = append(got, append(b, bytes.Repeat([]byte{byte(i)}, n)...))
	}
	for i, b := range got {
		if !bytes.Equal(b, bytes.Repeat([]byte{byte(i)}, len(b))) {
			t.Fatalf("slice %d was overwritten: %v", i, b[:min(len(b), 8)])
		}
	}
	seen := map[*kgo.Record]bool{}
	var hs [][]kgo.RecordHeader
	for i := 0; i < 3*arenaRecords; i++ {
		r := a.record()
		if seen[r] || r.Topic != "" || r.Value != nil {
			t.Fatalf("record %d: reused or not zero", i)
		}
		seen[r] = true
		r.Topic = "t"
		h := a.header(6)
		if len(h) != 0 || cap(h) != 6 {
			t.Fatalf("header(6): len %d cap %d", len(h), cap(h))
		}
		for j := 0; j < 6; j++ {
			h = append(h, kgo.RecordHeader{Key: strconv.Itoa(i)})
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		for _, x := range h {
			if x.Key != strconv.Itoa(i) {
				t.Fatalf("headers %d were overwritten: %v", i, h)
			}
		}
	}
}
