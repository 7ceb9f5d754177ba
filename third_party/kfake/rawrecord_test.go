package kfake

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ubik patch: the cleaner scans records with scanRawRecord instead of
// decoding them into kmsg.Record; both must read the same fields from the
// same bytes, and a record cut short is an error, not a panic.
func TestScanRawRecordMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	bytesOrNil := func(nilEvery int) []byte {
		if rng.Intn(nilEvery) == 0 {
			return nil
		}
		b := make([]byte, rng.Intn(40)) // zero length is not null
		rng.Read(b)
		return b
	}
	for i := 0; i < 2000; i++ {
		var recs []kmsg.Record
		var raw []byte
		for j := rng.Intn(5) + 1; j > 0; j-- {
			r := kmsg.NewRecord()
			r.TimestampDelta64 = rng.Int63n(1<<40) - 1<<39
			r.OffsetDelta = rng.Int31()
			r.Key = bytesOrNil(4)
			r.Value = bytesOrNil(3)
			for h := rng.Intn(4); h > 0; h-- {
				r.Headers = append(r.Headers, kmsg.Header{Key: string(bytesOrNil(1000)), Value: bytesOrNil(3)})
			}
			// AppendTo writes Length as it is: the body's size, the
			// encoding after a one-byte zero length.
			r.Length = int32(len(r.AppendTo(nil)) - 1)
			recs = append(recs, r)
			raw = r.AppendTo(raw)
		}
		rest := raw
		for j, want := range recs {
			got, next, err := scanRawRecord(rest)
			if err != nil {
				t.Fatalf("case %d record %d: %v", i, j, err)
			}
			if got.timestampDelta != want.TimestampDelta64 || got.offsetDelta != want.OffsetDelta ||
				!bytes.Equal(got.key, want.Key) || (got.key == nil) != (want.Key == nil) ||
				got.valueNil != (want.Value == nil) || !bytes.Equal(got.raw, want.AppendTo(nil)) {
				t.Fatalf("case %d record %d: scanned %+v, want %+v", i, j, got, want)
			}
			rest = next
		}
		if len(rest) != 0 {
			t.Fatalf("case %d: %d bytes left", i, len(rest))
		}
		// Every proper prefix of the first record is an error.
		first := recs[0].AppendTo(nil)
		for cut := 0; cut < len(first); cut++ {
			if _, _, err := scanRawRecord(first[:cut]); !errors.Is(err, errCorruptRecord) {
				t.Fatalf("case %d: %d of %d bytes: err %v, want errCorruptRecord", i, cut, len(first), err)
			}
		}
	}
}
