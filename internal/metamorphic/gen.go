package metamorphic

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"
)

// Source is the schema every generated query reads. The dedup key is the
// event id (duplicates are exact retries); the watermark delay is larger
// than any disorder the generator makes, so no event is ever late on any
// path (a Kafka path's watermark is the minimum over partitions, never
// ahead of the in-process one).
const Source = `CREATE SOURCE ev (id VARCHAR, g VARCHAR, x DOUBLE, n BIGINT, payload JSON, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = 'jsonl', dedup_key = 'id', dedup_within = '1 hour');
`

// QueryName is the name of every generated query (a bare SELECT's name is
// the script's file name on the CLI; a CREATE VIEW fixes it everywhere).
const QueryName = "mq"

// maxDisorder is how far behind the latest event time an event may be,
// strictly less than the watermark delay (2 s).
const maxDisorder = 1800 * time.Millisecond

// Case is one generated history: a query and its input lines.
type Case struct {
	Seed uint64 `json:"seed"`
	// SQL is the whole script: Source and one CREATE VIEW named QueryName.
	SQL string `json:"sql"`
	// Windowed: every (group, window) ends with exactly one final record.
	// Continuous views have none; their last record per key is compared.
	Windowed bool `json:"windowed"`
	// Monotone: the value's count column c never decreases along a key's
	// records (no HAVING).
	Monotone bool `json:"monotone"`
	// Note says where a corpus case came from.
	Note string `json:"note,omitempty"`
	// Lines are the events, one JSON object each (no newline inside).
	Lines [][]byte `json:"-"`
	// Events are the semantic values behind Lines (nil for a corpus case);
	// the batch oracle loads them.
	Events []Event `json:"-"`
	// Query describes the generated query (nil for a corpus case).
	Query *QuerySpec `json:"-"`
	// Views name the views the query reads (a view or interval-join
	// case): over Kafka each publishes its changelog to a topic of its
	// own, compared with ViewCase's reference.
	Views []string `json:"views,omitempty"`
	// Second names a join case's second input (the versioned table of a
	// temporal join, the right stream of an interval join; "" for a
	// case of one input); SecondLines are its rows, and SecondAt says
	// where each is pushed in process: before Lines[SecondAt[j]]
	// (len(Lines): after the last), ascending. Every path reads the two
	// inputs its own way (a file run the table first, Kafka two
	// topics); the finals must not depend on it.
	Second      string   `json:"second,omitempty"`
	SecondLines [][]byte `json:"-"`
	SecondAt    []int    `json:"second_at,omitempty"`
}

// Event is the meaning of one generated line, after the decoding rules:
// strings repaired, JSON text canonical.
type Event struct {
	ID    string
	G     string // repaired
	GNull bool
	X     XVal
	N     int64
	NNull bool
	K     string // canonical JSON text of payload.k; "" when absent (SQL NULL)
	TS    int64  // microseconds
	Dup   bool   // a retry of an earlier event (same id)
}

// XVal is a DOUBLE cell: its class decides the key cell, its spelling is
// one of the texts the decoder accepts for exactly this value.
type XVal struct {
	Null bool
	F    float64
	// Spelling is the JSON text written ("" leaves the field out).
	Spelling string
}

// QuerySpec is the generated query's shape.
type QuerySpec struct {
	Window  string   // "tumble", "hop", "session", "continuous"
	GroupBy []string // "g", "x", "k"
	Aggs    []string // aliases, see aggText
	Early   bool
	Having  bool
}

// The VARCHAR values of g and of payload.k strings; U+FFFD is also
// written as raw invalid UTF-8 (each such subpart decodes to one U+FFFD).
var genStrings = []string{"Boé", `a"b\c/d`, "tab\there\n", "😀中", "a\ufffdb", "\ufffd", "", "x", "m7"}

// The DOUBLE values and every spelling of exactly that value.
var genDoubles = []struct {
	null      bool
	f         float64
	spellings []string
}{
	{f: 0, spellings: []string{"0.0", "0", "0e5", "0.000"}},
	{f: negZero, spellings: []string{"-0.0", "-0", "-0E-3"}},
	{null: true, spellings: []string{"null", ""}},
	{f: nan, spellings: []string{"NaN", "nan", "-NaN"}},
	{f: posInf, spellings: []string{"Infinity", "1e400", "inf", "+Infinity"}},
	{f: negInf, spellings: []string{"-Infinity", "-1e400", "-inf"}},
	{f: 1.5, spellings: []string{"1.5", "15e-1", "1.50", "0.15E1"}},
	{f: -2, spellings: []string{"-2", "-2.0", "-20e-1"}},
	{f: 0.1, spellings: []string{"0.1", "1e-1"}},
	{f: 1e16, spellings: []string{"1e16", "10000000000000000"}},
}

// The JSON values of payload.k: canonical text and spellings (a string
// value is spelled by spellString).
var genJSON = []struct {
	canon     string
	str       string
	spellings []string
}{
	{canon: `"Boé"`, str: "Boé"},
	{canon: `"x\ny\u001F"`, str: "x\ny\x1f"},
	{canon: `"😀"`, str: "😀"},
	{canon: `2.5`, spellings: []string{"2.5", "2.50", "25e-1", "0.25E+1"}},
	{canon: `{"a":[1,true],"b":"é"}`, spellings: []string{`{"a":[1,true],"b":"é"}`, `{ "a" : [ 1 , true ] , "b" : "\u00e9" }`, "{\t\"a\":[1,\ttrue],\"b\":\"\\u00E9\"}"}},
	{canon: `0`, spellings: []string{"0", "-0"}},
	{canon: ``, spellings: []string{""}}, // payload without k
}

// spellString writes s as a JSON string in a random spelling: each
// character raw or escaped (short escape, \u in either hex case, a
// surrogate pair above U+FFFF), U+FFFD sometimes as a raw invalid UTF-8
// subpart that nothing after it can extend.
func spellString(r *rand.Rand, s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		must := c == '"' || c == '\\' || c < 0x20
		switch k := r.IntN(4); {
		case c == utf8.RuneError && k == 0:
			b.WriteString([]string{"\xff", "\xfe", "\xf5", "\xc0", "\xe2\x82"}[r.IntN(5)])
		case !must && k < 2:
			b.WriteRune(c)
		case k == 2 && strings.ContainsRune("\"\\\n\t\r\b\f/", c):
			b.WriteString(map[rune]string{'"': `\"`, '\\': `\\`, '\n': `\n`, '\t': `\t`, '\r': `\r`, '\b': `\b`, '\f': `\f`, '/': `\/`}[c])
		default:
			hex := "%04x"
			if r.IntN(2) == 0 {
				hex = "%04X"
			}
			if c > 0xffff {
				c -= 0x10000
				fmt.Fprintf(&b, `\u`+hex+`\u`+hex, 0xd800+(c>>10), 0xdc00+(c&0x3ff))
			} else {
				fmt.Fprintf(&b, `\u`+hex, c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Size bounds the generated history.
type Size struct {
	Events int // distinct events (duplicates come on top)
}

// Generate makes the case of one seed: a random query over Source and a
// history of adversarially spelled events. The same seed always gives the
// same case.
func Generate(seed uint64, size Size) *Case {
	r := rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc909))
	q := genQuery(r)
	c := &Case{Seed: seed, SQL: Source + q.sql(), Windowed: q.Window != "continuous", Query: q,
		Monotone: !q.Having}
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	// A small pool per column so groups collide; 3..9 strings.
	gs := genStrings[:3+r.IntN(len(genStrings)-2)]
	step := int64(5_000 + r.IntN(40_000)) // 5..45 ms between events
	dupRate := r.IntN(10)                 // percent
	var maxTS int64
	for i := 0; i < size.Events; i++ {
		ts := base + int64(i)*step
		if r.IntN(3) == 0 {
			ts -= r.Int64N(maxDisorder.Microseconds())
		}
		// Never more than maxDisorder behind the latest event so far.
		if lo := maxTS - maxDisorder.Microseconds(); ts < lo {
			ts = lo
		}
		maxTS = max(maxTS, ts)
		e := Event{ID: fmt.Sprintf("e%d", i), TS: ts}
		if r.IntN(25) == 0 {
			e.GNull = true
		} else {
			e.G = gs[r.IntN(len(gs))]
		}
		d := genDoubles[r.IntN(len(genDoubles))]
		e.X = XVal{Null: d.null, F: d.f, Spelling: d.spellings[r.IntN(len(d.spellings))]}
		switch r.IntN(12) {
		case 0:
			e.NNull = true
		case 1:
			e.N = r.Int64N(1<<62) - 1<<61
		default:
			e.N = r.Int64N(200) - 50
		}
		k := genJSON[r.IntN(len(genJSON))]
		kText := ""
		if k.str != "" {
			kText = spellString(r, k.str)
		} else {
			kText = k.spellings[r.IntN(len(k.spellings))]
		}
		e.K = k.canon
		line := spellLine(r, &e, kText)
		c.Events = append(c.Events, e)
		c.Lines = append(c.Lines, line)
		// A retry of a recent event: the same bytes, or the same values
		// spelled again (x keeps its text: its spellings are one value).
		if r.IntN(100) < dupRate && i > 0 {
			j := len(c.Events) - 1 - r.IntN(min(8, len(c.Events)))
			if !c.Events[j].Dup {
				d := c.Events[j]
				d.Dup = true
				var dl []byte
				if r.IntN(2) == 0 {
					dl = append([]byte(nil), c.Lines[j]...)
				} else {
					dl = spellLine(r, &d, respellK(r, d.K))
				}
				c.Events = append(c.Events, d)
				c.Lines = append(c.Lines, dl)
			}
		}
	}
	return c
}

// respellK writes canonical JSON text k in another spelling ("" stays
// absent).
func respellK(r *rand.Rand, canon string) string {
	for _, k := range genJSON {
		if k.canon == canon {
			if k.str != "" {
				return spellString(r, k.str)
			}
			return k.spellings[r.IntN(len(k.spellings))]
		}
	}
	return canon
}

// ws is random insignificant JSON whitespace.
func ws(r *rand.Rand) string { return []string{"", "", " ", "\t", " \r "}[r.IntN(5)] }

// spellLine writes e as one JSON object with its fields in random order
// and random whitespace; kText is the spelling of payload.k ("" absent).
func spellLine(r *rand.Rand, e *Event, kText string) []byte {
	var fields []string
	fields = append(fields, `"id":`+ws(r)+`"`+e.ID+`"`)
	if e.GNull {
		// Written, not left out: `ubik produce --key-field g` sends a line
		// without the field unkeyed (round-robin), which would split the
		// NULL group of a direct Kafka run over partitions.
		fields = append(fields, `"g"`+ws(r)+":"+ws(r)+"null")
	} else {
		fields = append(fields, `"g"`+ws(r)+":"+ws(r)+spellString(r, e.G))
	}
	if e.X.Spelling != "" {
		fields = append(fields, `"x":`+ws(r)+e.X.Spelling)
	}
	if e.NNull {
		fields = append(fields, `"n":null`)
	} else {
		fields = append(fields, fmt.Sprintf(`"n":%s%d`, ws(r), e.N))
	}
	p := `"payload":` + ws(r) + "{" + ws(r)
	if kText != "" {
		p += `"k"` + ws(r) + ":" + ws(r) + kText + "," + ws(r)
	}
	p += `"z":` + ws(r) + "[" + ws(r) + "1" + ws(r) + "]" + ws(r) + "}"
	fields = append(fields, p)
	fields = append(fields, `"ts":"`+time.UnixMicro(e.TS).UTC().Format("2006-01-02 15:04:05.000000")+`"`)
	r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	line := "{" + ws(r) + strings.Join(fields, ","+ws(r)) + ws(r) + "}"
	if strings.Contains(line, "\n") {
		panic("metamorphic: a generated line holds a raw newline: " + line)
	}
	return []byte(line)
}

// The aggregates a query may compute, by alias. c is always there (the
// monotone-count invariant reads it).
var aggText = map[string]string{
	"c":  "count(*)",
	"cx": "count(x)",
	"sx": "sum(x)",
	"sn": "sum(n)",
	"lo": "min(x)",
	"hi": "max(x)",
	"av": "avg(x)",
	"an": "avg(n)",
	"dx": "count(DISTINCT x)",
	"dk": "count(DISTINCT payload->'k')",
	"ag": "approx_count_distinct(g)",
	"ak": "approx_count_distinct(payload->'k')",
	"mg": "min(g)",
	"xg": "max(g)",
	"ln": "min(n)",
	"hn": "max(n)",
}

var aggOrder = []string{"cx", "sx", "sn", "lo", "hi", "av", "an", "dx", "dk", "ag", "ak", "mg", "xg", "ln", "hn"}

func genQuery(r *rand.Rand) *QuerySpec {
	q := &QuerySpec{Window: []string{"tumble", "hop", "session", "continuous"}[r.IntN(4)]}
	// g always leads, so a Kafka source keyed by g is partitioned by the
	// GROUP BY key (the direct path).
	q.GroupBy = []string{"g"}
	if r.IntN(2) == 0 {
		q.GroupBy = append(q.GroupBy, "x")
	}
	if r.IntN(2) == 0 {
		q.GroupBy = append(q.GroupBy, "k")
	}
	q.Aggs = []string{"c"}
	for _, a := range aggOrder {
		if r.IntN(3) == 0 {
			q.Aggs = append(q.Aggs, a)
		}
	}
	// A session publishes only when it closes (its start can move).
	q.Early = (q.Window == "tumble" || q.Window == "hop") && r.IntN(2) == 0
	q.Having = r.IntN(6) == 0
	return q
}

func groupExpr(c string) string {
	if c == "k" {
		return "payload->'k'"
	}
	return c
}

// sql renders the query as a CREATE VIEW named QueryName.
func (q *QuerySpec) sql() string {
	var sel, grp []string
	for _, c := range q.GroupBy {
		e := groupExpr(c)
		if e != c {
			e += " AS " + c
		}
		sel = append(sel, e)
		grp = append(grp, groupExpr(c))
	}
	switch q.Window {
	case "tumble":
		sel = append(sel, "TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws")
		grp = append(grp, "TUMBLE(ts, INTERVAL '10' SECOND)")
	case "hop":
		sel = append(sel, "HOP_START(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS ws")
		grp = append(grp, "HOP(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND)")
	case "session":
		sel = append(sel, "SESSION_START(ts, INTERVAL '300' MILLISECOND) AS ws", "SESSION_END(ts, INTERVAL '300' MILLISECOND) AS we")
		grp = append(grp, "SESSION(ts, INTERVAL '300' MILLISECOND)")
	}
	for _, a := range q.Aggs {
		sel = append(sel, aggText[a]+" AS "+a)
	}
	s := "CREATE VIEW " + QueryName + " AS SELECT " + strings.Join(sel, ", ") + "\nFROM ev GROUP BY " + strings.Join(grp, ", ")
	if q.Having {
		s += " HAVING count(*) > 1"
	}
	if q.Early {
		s += " EMIT EARLY EVERY INTERVAL '10' MILLISECOND"
	}
	return s + ";\n"
}

// Named is the case's script with its view renamed (a Kafka run names its
// consumer groups and internal topics after the query, so each run on a
// shared broker needs its own name). Keys and values do not carry it.
func (c *Case) Named(name string) string {
	return strings.Replace(c.SQL, "CREATE VIEW "+QueryName+" AS", "CREATE VIEW "+name+" AS", 1)
}
