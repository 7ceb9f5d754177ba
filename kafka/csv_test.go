package kafka

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/types"
)

// csvValue is e as one CSV record: the merchant quoted (quotes doubled),
// the event time quoted as the changelog writes it.
func (e event) csvValue() []byte {
	b := fmt.Appendf(nil, `"%s",%d,`, strings.ReplaceAll(e.merchant, `"`, `""`), e.amount)
	return changelog.AppendCell(b, types.TS(e.ts))
}

// hostileName gives a generated merchant a name with every character CSV
// must protect: the delimiter, a quote, a line break.
func hostileName(m string) string {
	return m + `, "inc"` + "\r\nline 2"
}

// TestCSVSource runs a windowed query over CSV record values, in both
// modes, with header records (skipped: header = 'true') and malformed
// values spread over the partitions, and checks the finals against the
// oracle, the counters, and that every malformed value reached OnBadEvent
// with its offset.
func TestCSVSource(t *testing.T) {
	bads := []string{
		"m,1",                       // too few fields
		`m,ten,2026-07-18 10:00:00`, // bad cast
		"",                          // empty
		"m,1,2026-07-18 10:00:00\nm,2,2026-07-18 10:00:01", // two records
		`"m,1,2026-07-18 10:00:00`,                         // unterminated quote
		`m,1,`,                                             // no event time
	}
	for i, direct := range []bool{false, true} {
		name := "repartition"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			const parts = 3
			c := cluster(t)
			addrs := c.ListenAddrs()
			mkTopic(t, addrs, "events", parts, nil)
			evs := genEvents(uint64(70+i), 3000)
			for k := range evs {
				evs[k].merchant = hostileName(evs[k].merchant)
			}
			var recs []*kgo.Record
			for p := 0; p < parts; p++ {
				recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(p), Value: []byte("merchant,amount,event_time\r\n")})
			}
			for k, e := range evs {
				p := k % parts
				if direct {
					h := fnv.New32a()
					h.Write([]byte(e.merchant))
					p = int(h.Sum32() % parts)
				}
				recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(p), Value: e.csvValue()})
				if k%500 == 250 {
					b := bads[(k/500)%len(bads)]
					recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(p), Value: []byte(b)})
				}
			}
			nBad := 0
			for k := range evs {
				if k%500 == 250 {
					nBad++
				}
			}
			cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(1<<20))
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatalf("producing input: %v", err)
			}
			src := endpoint(addrs, "events")
			src.PartitionedByKey = direct
			src.Format = drive.MessageFormat{CSV: true, Delimiter: ',', SkipHeader: true}
			var mu sync.Mutex
			var badSeen []*BadEvent
			st := runUntilCaughtUp(t, Options{Query: tumbleQuery("csvtotals", 0), Source: src, Sink: endpoint(addrs, "out"),
				InstanceID: "a", Logger: testLogger(t), OnBadEvent: func(e *BadEvent) {
					mu.Lock()
					badSeen = append(badSeen, e)
					mu.Unlock()
				}})
			if st.EventsIn != int64(len(recs)) || st.HeadersSkipped != parts || st.Malformed != int64(nBad) || st.EvalErrors != 0 {
				t.Errorf("stats %+v: want %d in, %d headers skipped, %d malformed", st, len(recs), parts, nBad)
			}
			mu.Lock()
			if len(badSeen) != nBad {
				t.Errorf("OnBadEvent got %d records, want %d", len(badSeen), nBad)
			}
			for _, b := range badSeen {
				if !errors.Is(b, drive.ErrMalformed) || b.Topic != "events" || b.Offset <= 0 {
					t.Errorf("bad event %v: want a malformed source record after the header", b)
				}
			}
			mu.Unlock()
			f := follow(t, addrs, "out", false)
			f.waitFinals(t, tumbleOracle(evs), 30*time.Second)
		})
	}
}

// TestCSVSourceRefusesUnreadableFormat: a format the source cannot be read
// with fails at New, not at the first record.
func TestCSVSourceRefusesUnreadableFormat(t *testing.T) {
	src := endpoint([]string{"127.0.0.1:1"}, "events")
	src.Format = drive.MessageFormat{CSV: true, Delimiter: '\n'}
	_, err := New(Options{Query: tumbleQuery("q", 0), Source: src, Sink: endpoint([]string{"127.0.0.1:1"}, "out")})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "delimiter") {
		t.Fatalf("New with a newline delimiter: %v, want ErrConfig about the delimiter", err)
	}
}
