package exec

import (
	"fmt"
	"hash/maphash"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

const benchSource = `CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount DOUBLE, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND) WITH (format = 'jsonl');`

func benchLines(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		ms := 36000000 + i
		out[i] = fmt.Appendf(nil, `{"event_id":"e%d","merchant":"m%d","customer":"c%d","amount":%d.%02d,"event_time":"2026-07-18 %02d:%02d:%02d.%03d"}`,
			i, (i*7919)%10000, i%100000, i%500, i%100, ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
	}
	return out
}

func compileBench(b *testing.B, sql string) *plan.Query {
	b.Helper()
	prog, err := plan.Compile(benchSource+sql, plan.CompileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return prog.Queries[0]
}

// BenchmarkDecode: one standard event per op, through the one-pass scanner
// and through the fastjson reference path.
func BenchmarkDecode(b *testing.B) {
	q := compileBench(b, `SELECT merchant, count(*) FROM events GROUP BY merchant`)
	lines := benchLines(4096)
	for _, bc := range []struct {
		name string
		ref  bool
	}{{"scan", false}, {"fastjson", true}} {
		b.Run(bc.name, func(b *testing.B) {
			d := NewDecoder(q.Source)
			d.noScan = bc.ref
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := d.Decode(lines[i&4095]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkWindowOperator: decoded rows into the operator, per window shape
// (allocations are per event; records are counted, not encoded to output).
func BenchmarkWindowOperator(b *testing.B) {
	queries := map[string]string{
		"tumble":     `SELECT merchant, count(*), sum(amount), max(amount) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`,
		"hop":        `SELECT merchant, count(*) FROM events GROUP BY merchant, HOP(event_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)`,
		"session":    `SELECT merchant, count(*) FROM events GROUP BY merchant, SESSION(event_time, INTERVAL '10' SECOND)`,
		"continuous": `SELECT merchant, count(*), sum(amount) FROM events GROUP BY merchant EMIT EARLY EVERY INTERVAL '1' SECOND`,
	}
	for _, name := range []string{"tumble", "hop", "session", "continuous"} {
		b.Run(name, func(b *testing.B) {
			q := compileBench(b, queries[name])
			d := NewDecoder(q.Source)
			lines := benchLines(1 << 16)
			rows := make([][]types.Value, len(lines))
			for i, l := range lines {
				r, err := d.Decode(l)
				if err != nil {
					b.Fatal(err)
				}
				rows[i] = append([]types.Value(nil), r...)
				for j := range rows[i] {
					rows[i][j].S = string([]byte(rows[i][j].S))
				}
			}
			var records int
			var clock int64
			newOp := func() *Operator {
				op, err := New(q, Config{Emit: func(*changelog.Record) error { records++; return nil }, Nanotime: func() int64 { clock++; return clock }})
				if err != nil {
					b.Fatal(err)
				}
				return op
			}
			op := newOp()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i > 0 && i%len(rows) == 0 {
					op.Finish()
					op = newOp() // event time starts over: a fresh operator
				}
				if err := op.Process(rows[i%len(rows)]); err != nil {
					b.Fatal(err)
				}
				if i%4096 == 4095 {
					op.EmitEarly()
				}
			}
			op.Finish()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(records)/float64(b.N), "records/event")
		})
	}
}

// BenchmarkGroupKey: one GROUP BY cell into the group key, by the group
// rules (appendGroupCell) and by the value encoding alone (appendKeyBytes,
// what the key was before the rules), for the common key types.
func BenchmarkGroupKey(b *testing.B) {
	cells := map[string]types.Value{"varchar": types.Str("merchant_0042"), "bigint": types.Big(4242), "double": types.Float(139.46)}
	for _, name := range []string{"varchar", "bigint", "double"} {
		v := cells[name]
		b.Run(name+"/value", func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 64)
			for b.Loop() {
				buf = appendKeyBytes(buf[:0], v)
			}
		})
		b.Run(name+"/group", func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 64)
			for b.Loop() {
				buf = appendGroupCell(buf[:0], &v)
			}
		})
	}
}

// BenchmarkDecodeBids: one Nexmark-style bid per op (three BIGINTs, a
// short and a long string, an event time), every column read, through the
// scanner.
func BenchmarkDecodeBids(b *testing.B) {
	prog, err := plan.Compile(`CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND) WITH (format = 'jsonl');
SELECT auction, channel, url, count(*), sum(price), max(bidder) FROM bids GROUP BY auction, channel, url`, plan.CompileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	lines := make([][]byte, 4096)
	for i := range lines {
		ms := 36000000 + i
		lines[i] = fmt.Appendf(nil, `{"auction":%d,"bidder":%d,"price":%d,"channel":"Google","url":"https://www.nexmark.com/Google/item.htm?query=%d","date_time":"2026-07-18 %02d:%02d:%02d.%03d"}`,
			1000+i%97, 1000+i%1013, 100+i*7919%1000000, i%10, ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
	}
	d := NewDecoder(prog.Queries[0].Source)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := d.Decode(lines[i&4095]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkBucket: a window's group index, per op one key, by the number
// of groups: "new" adds keys never seen (a probe that finds nothing, then
// the group's creation: at millions of groups the index is cold), "hit"
// finds a key already there.
func BenchmarkBucket(b *testing.B) {
	for _, n := range []int{1000, 1 << 20} {
		keys := make([][]byte, n)
		hashes := make([]uint64, n)
		seed := maphash.MakeSeed()
		for i := range keys {
			keys[i] = appendKeyBytes(nil, types.Str(fmt.Sprintf("m%d", i*7919)))
			hashes[i] = maphash.Bytes(seed, keys[i])
		}
		b.Run(fmt.Sprintf("new/%d", n), func(b *testing.B) {
			bk := newBucket(0, 0, seed, 3)
			bk.reserve(n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%n == 0 && i > 0 {
					bk = newBucket(0, 0, seed, 3)
					bk.reserve(n)
				}
				j := i % n
				if bk.lookup(keys[j], hashes[j]) == nil {
					bk.add(keys[j], hashes[j])
				}
			}
		})
		b.Run(fmt.Sprintf("hit/%d", n), func(b *testing.B) {
			bk := newBucket(0, 0, seed, 3)
			for j := range keys {
				bk.add(keys[j], hashes[j])
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				j := (i * 40503) % n
				if bk.lookup(keys[j], hashes[j]) == nil {
					b.Fatal("key not found")
				}
			}
		})
	}
}
