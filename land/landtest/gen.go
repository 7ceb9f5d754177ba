package landtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
)

// base is the first window start of generated records: 2026-07-18 10:00 UTC.
var base = time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)

// Hour is the window size of generated windowed records, in µs.
const Hour = int64(time.Hour / time.Microsecond)

// Gen makes the complete changelog of a set of groups, as the engine would
// emit it: per (group, window), revisions 1..n, the last one final when the
// window closed. Keys follow the contract ("[group, window start]" for a
// windowed record, "[group]" for a continuous one); values are JSON objects
// that differ per revision, so a wrong winner is visible.
type Gen struct {
	Mode    land.Mode
	Queries []string // query names to spread groups over (default: one)
	// Groups, Windows and Revisions bound the counts drawn per trial.
	Groups, Windows, Revisions int
}

// Changelog returns the records of one trial: trial names its groups, so
// two trials never share an identity.
func (g Gen) Changelog(r *rand.Rand, trial int) []changelog.Record {
	qs := g.Queries
	if len(qs) == 0 {
		qs = []string{"q"}
	}
	var out []changelog.Record
	ng := 1 + r.IntN(max(1, g.Groups))
	for gi := range ng {
		q := qs[r.IntN(len(qs))]
		group := fmt.Sprintf("t%d-g%d", trial, gi)
		nw := 1
		if g.Mode.Windowed() {
			nw = 1 + r.IntN(max(1, g.Windows))
		}
		// Windows need not be contiguous; a late window may come first.
		ws0 := base.Add(time.Duration(r.IntN(48)) * time.Hour)
		for wi := range nw {
			start := ws0.Add(time.Duration(wi) * time.Hour)
			nr := 1 + r.IntN(max(1, g.Revisions))
			closed := r.IntN(3) > 0
			for rev := 1; rev <= nr; rev++ {
				out = append(out, Record(g.Mode, q, group, start, uint64(rev), closed && rev == nr))
			}
		}
	}
	return out
}

// Record builds one record. Its value carries every field that identifies
// it, and a total that grows with the revision.
func Record(mode land.Mode, query, group string, windowStart time.Time, rev uint64, final bool) changelog.Record {
	r := changelog.Record{Meta: changelog.Meta{Query: query, Revision: rev, Final: final}}
	if mode == land.Continuous {
		r.Key = fmt.Appendf(nil, "[%q]", group)
		r.Value = fmt.Appendf(nil, `{"group":%q,"total":%d,"rev":%d}`, group, rev*10+uint64(len(group)), rev)
		return r
	}
	ws := windowStart.UTC().Format("2006-01-02 15:04:05")
	r.Key = fmt.Appendf(nil, "[%q, %q]", group, ws)
	r.Value = fmt.Appendf(nil, `{"group":%q,"window_start":%q,"total":%d,"rev":%d}`, group, ws, rev*10+uint64(len(group)), rev)
	r.Meta.Windowed = true
	r.Meta.WindowStart = windowStart.UnixMicro()
	r.Meta.WindowEnd = windowStart.Add(time.Hour).UnixMicro()
	r.Meta.WindowPositions = []int{1}
	return r
}

// Deliver returns recs as an at-least-once, unordered transport would
// deliver them: every record 1..maxCopies times, in a random order.
func Deliver(r *rand.Rand, recs []changelog.Record, maxCopies int) []changelog.Record {
	var out []changelog.Record
	for _, rec := range recs {
		for range 1 + r.IntN(max(1, maxCopies)) {
			out = append(out, rec)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Batches splits recs into consecutive batches of 1..maxSize records.
func Batches(r *rand.Rand, recs []changelog.Record, maxSize int) [][]changelog.Record {
	var out [][]changelog.Record
	for len(recs) > 0 {
		n := min(len(recs), 1+r.IntN(max(1, maxSize)))
		out = append(out, recs[:n])
		recs = recs[n:]
	}
	return out
}

// Base is the first window start of generated records.
func Base() time.Time { return base }

// BenchRecords returns n records over keys groups of one latest-mode query:
// record i is group i%keys at revision i/keys+1, all in one window, in
// order, as a steady stream of corrections arrives.
func BenchRecords(n, keys int) []changelog.Record {
	out := make([]changelog.Record, n)
	for i := range out {
		out[i] = Record(land.Latest, "bench", fmt.Sprintf("k%d", i%keys), base, uint64(i/keys+1), false)
	}
	return out
}

// BenchLand lands b.N records over keys groups (use -benchtime=1000000x
// for the 1M-record run) in batches, and reports records/s.
func BenchLand(b *testing.B, l land.Lander, keys, batch int) {
	recs := BenchRecords(b.N, keys)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < len(recs); i += batch {
		if _, err := l.Land(context.Background(), recs[i:min(i+batch, len(recs))]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
