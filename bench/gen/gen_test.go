package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func generate(t *testing.T, cfg Config) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Generate(&buf, cfg)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", cfg, err)
	}
	return buf.Bytes(), st
}

func lines(b []byte) [][]byte {
	ls := bytes.SplitAfter(b, []byte("\n"))
	if len(ls) > 0 && len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

func TestDeterministic(t *testing.T) {
	for _, kind := range []Kind{KindMerchant, KindBids} {
		cfg := DefaultConfig()
		cfg.Kind = kind
		cfg.Events = 50_000
		cfg.Seed = 42
		a, _ := generate(t, cfg)
		b, _ := generate(t, cfg)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: two runs with seed 42 differ", kind)
		}
		cfg.Seed = 43
		c, _ := generate(t, cfg)
		if bytes.Equal(a, c) {
			t.Fatalf("%s: seeds 42 and 43 give the same bytes", kind)
		}
	}
}

// TestGolden pins the first lines of the default workloads: a change here
// changes every benchmark file, so it must be deliberate.
func TestGolden(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Events = 2
	m, _ := generate(t, cfg)
	want := `{"event_id":"eae0557234ee1eb7","merchant":"m19","customer":"c57410","amount":153.98,"event_time":"2026-07-18 10:00:00.000"}
{"event_id":"6bdcdc1d5effccac","merchant":"m3272","customer":"c38118","amount":752.20,"event_time":"2026-07-18 10:00:00.001"}
`
	if string(m) != want {
		t.Errorf("merchant lines:\n%s\nwant:\n%s", m, want)
	}
	cfg.Kind = KindBids
	b, _ := generate(t, cfg)
	want = `{"auction":1019,"bidder":1011,"price":22283,"channel":"Google","url":"https://www.nexmark.com/Google/item.htm?query=1","date_time":"2026-07-18 10:00:00.000"}
{"auction":1000,"bidder":1014,"price":39394415,"channel":"Apple","url":"https://www.nexmark.com/Apple/item.htm?query=1","date_time":"2026-07-18 10:00:00.001"}
`
	if string(b) != want {
		t.Errorf("bid lines:\n%s\nwant:\n%s", b, want)
	}
}

type merchantEvent struct {
	EventID   string  `json:"event_id"`
	Merchant  string  `json:"merchant"`
	Customer  string  `json:"customer"`
	Amount    float64 `json:"amount"`
	EventTime string  `json:"event_time"`
}

type bid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime string `json:"date_time"`
}

func decodeStrict(t *testing.T, line []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	ts, err := time.Parse("2006-01-02 15:04:05.000", s)
	if err != nil {
		t.Fatalf("event time %q: %v", s, err)
	}
	return ts
}

// TestProperties checks, for random seeds and settings, the line count, the
// disorder bound, the duplicate rate and that each duplicate repeats an
// earlier line byte for byte.
func TestProperties(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("property seed %d", seed)
	pick := rand.New(rand.NewPCG(seed, 7))
	for round := 0; round < 4; round++ {
		cfg := DefaultConfig()
		cfg.Seed = pick.Uint64()
		cfg.Events = 50_000 + pick.Int64N(50_000)
		cfg.Kind = []Kind{KindMerchant, KindBids}[round%2]
		cfg.Disorder = time.Duration(pick.IntN(6000)) * time.Millisecond
		cfg.DupRate = []float64{0.001, 0.01, 0}[pick.IntN(3)]
		cfg.LateFrac = pick.Float64()
		cfg.Groups = 1 + pick.IntN(20_000)
		cfg.Dist = []Dist{DistZipf, DistUniform}[pick.IntN(2)]
		b, st := generate(t, cfg)
		ls := lines(b)
		if int64(len(ls)) != cfg.Events || st.Lines != cfg.Events {
			t.Fatalf("seed %d %+v: %d lines, stats %d, want %d", seed, cfg, len(ls), st.Lines, cfg.Events)
		}
		var maxSeen time.Time
		var worst time.Duration
		seen := make(map[string]bool, len(ls))
		dups := 0
		for _, l := range ls {
			// The field tests decode lines strictly; here only the time is
			// needed, taken from the fixed tail `_time":"...."}`.
			i := bytes.LastIndex(l, []byte(`_time":"`))
			if i < 0 || !bytes.HasSuffix(l, []byte("\"}\n")) {
				t.Fatalf("seed %d: line %q has no event time at its end", seed, l)
			}
			ts := string(l[i+len(`_time":"`) : len(l)-3])
			if seen[string(l)] {
				dups++
			}
			seen[string(l)] = true
			at := parseTime(t, ts)
			if at.After(maxSeen) {
				maxSeen = at
			}
			if lag := maxSeen.Sub(at); lag > worst {
				worst = lag
			}
		}
		if worst > cfg.Disorder {
			t.Fatalf("seed %d %+v: an event trails the max by %v > disorder %v", seed, cfg, worst, cfg.Disorder)
		}
		if cfg.Disorder >= time.Second && cfg.LateFrac > 0.05 && worst < cfg.Disorder*8/10 {
			t.Errorf("seed %d %+v: worst disorder %v, far below the bound %v", seed, cfg, worst, cfg.Disorder)
		}
		if int64(dups) != st.Duplicates {
			t.Fatalf("seed %d: %d repeated lines, stats say %d", seed, dups, st.Duplicates)
		}
		want := cfg.DupRate * float64(cfg.Events)
		// Binomial: allow 5 standard deviations.
		if tol := 5*math.Sqrt(want) + 1; math.Abs(float64(dups)-want) > tol {
			t.Fatalf("seed %d %+v: %d duplicates, want %.0f ± %.0f", seed, cfg, dups, want, tol)
		}
	}
}

var amountText = regexp.MustCompile(`,"amount":[1-9][0-9]{0,2}\.[0-9]{2},`)

// TestInOrder checks the base clock: with no delay and no duplicate, event i
// is at Start + i ms.
func TestInOrder(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Events = 5000
	cfg.LateFrac = 0
	cfg.DupRate = 0
	b, st := generate(t, cfg)
	if st.Delayed != 0 || st.Duplicates != 0 {
		t.Fatalf("stats %+v, want no delay and no duplicate", st)
	}
	for i, l := range lines(b) {
		var e merchantEvent
		decodeStrict(t, l, &e)
		if at, want := parseTime(t, e.EventTime), cfg.Start.Add(time.Duration(i)*time.Millisecond); !at.Equal(want) {
			t.Fatalf("event %d at %v, want %v", i, at, want)
		}
	}
}

func TestMerchantFields(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Events = 20_000
	cfg.Groups = 50
	b, _ := generate(t, cfg)
	ids := map[string]string{}
	for _, l := range lines(b) {
		var e merchantEvent
		decodeStrict(t, l, &e)
		if !bytes.HasPrefix(l, []byte(`{"event_id":"`)) {
			t.Fatalf("field order: %q", l)
		}
		if prev, ok := ids[e.EventID]; ok && prev != string(l) {
			t.Fatalf("event_id %s reused by a different event:\n%s%s", e.EventID, prev, l)
		}
		ids[e.EventID] = string(l)
		k, err := strconv.Atoi(strings.TrimPrefix(e.Merchant, "m"))
		if err != nil || k < 0 || k >= cfg.Groups {
			t.Fatalf("merchant %q outside m0..m%d", e.Merchant, cfg.Groups-1)
		}
		c, err := strconv.Atoi(strings.TrimPrefix(e.Customer, "c"))
		if err != nil || c < 0 || c >= customers {
			t.Fatalf("customer %q", e.Customer)
		}
		if e.Amount < 1 || e.Amount >= 1000 || !amountText.Match(l) {
			t.Fatalf("amount %v in %q: want 1.00 to 999.99 with two decimals", e.Amount, l)
		}
	}
}

func TestBidFields(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kind = KindBids
	cfg.Events = 20_000
	cfg.Groups = 300
	b, _ := generate(t, cfg)
	hot := 0
	for _, l := range lines(b) {
		var e bid
		decodeStrict(t, l, &e)
		if !bytes.HasPrefix(l, []byte(`{"auction":`)) {
			t.Fatalf("field order: %q", l)
		}
		for _, id := range []int64{e.Auction, e.Bidder} {
			if id < nexmarkFirstID || id >= nexmarkFirstID+int64(cfg.Groups) {
				t.Fatalf("id %d outside [1000, %d): %s", id, 1000+cfg.Groups, l)
			}
		}
		if e.Price < 100 || e.Price > 100_000_000 {
			t.Fatalf("price %d", e.Price)
		}
		if !strings.Contains(e.URL, "/"+e.Channel+"/") {
			t.Fatalf("url %q does not name channel %q", e.URL, e.Channel)
		}
		if !strings.HasPrefix(e.Channel, "channel-") {
			hot++
		}
	}
	if frac := float64(hot) / float64(cfg.Events); frac < 0.88 || frac > 0.92 {
		t.Errorf("hot channel fraction %.3f, want about 0.9", frac)
	}
}

// TestZipfShape compares the frequencies of the hottest keys with the Zipf
// probabilities (k+1)^-s / H.
func TestZipfShape(t *testing.T) {
	for _, s := range []float64{1.1, 1.5} {
		const groups, draws = 1000, 400_000
		z := newZipf(s, groups-1)
		r := newRNG(9)
		counts := make([]int, groups)
		for i := 0; i < draws; i++ {
			k := z.next(&r)
			if k >= groups {
				t.Fatalf("key %d >= %d", k, groups)
			}
			counts[k]++
		}
		h := 0.0
		for k := 0; k < groups; k++ {
			h += math.Pow(float64(k+1), -s)
		}
		for _, k := range []int{0, 1, 2, 9, 99, 999} {
			p := math.Pow(float64(k+1), -s) / h
			want := p * draws
			if tol := 5*math.Sqrt(want) + 2; math.Abs(float64(counts[k])-want) > tol {
				t.Errorf("s=%v key %d: %d draws, want %.0f ± %.0f", s, k, counts[k], want, tol)
			}
		}
	}
}

func TestUniformCoversGroups(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Dist = DistUniform
	cfg.Groups = 1000
	cfg.Events = 30_000
	b, _ := generate(t, cfg)
	seen := map[string]bool{}
	for _, l := range lines(b) {
		var e merchantEvent
		decodeStrict(t, l, &e)
		seen[e.Merchant] = true
	}
	if len(seen) != cfg.Groups {
		t.Errorf("%d distinct merchants, want all %d", len(seen), cfg.Groups)
	}
}

func TestValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Kind = "orders" },
		func(c *Config) { c.Events = -1 },
		func(c *Config) { c.Groups = 0 },
		func(c *Config) { c.Dist = "normal" },
		func(c *Config) { c.ZipfS = 1 },
		func(c *Config) { c.ZipfS = math.NaN() },
		func(c *Config) { c.Disorder = -time.Second },
		func(c *Config) { c.LateFrac = 1.5 },
		func(c *Config) { c.DupRate = 1 },
		func(c *Config) { c.DupRate = math.NaN() },
		func(c *Config) { c.UpdateRate = 1.5 },
		func(c *Config) { c.UpdateRate = math.NaN() },
		func(c *Config) { c.Start = time.Time{} },
	}
	for i, f := range bad {
		cfg := DefaultConfig()
		f(&cfg)
		if _, err := Generate(&bytes.Buffer{}, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("case %d (%+v): err %v, want ErrConfig", i, cfg, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestCLI(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bids.jsonl")
	var stderr bytes.Buffer
	err := run([]string{"--kind", "bids", "--events", "1000", "--seed", "5", "--start", "2026-01-02 03:04:05", "--out", out}, &bytes.Buffer{}, &stderr)
	if err != nil {
		t.Fatalf("run: %v (%s)", err, stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if n == 0 && !strings.HasSuffix(sc.Text(), `"date_time":"2026-01-02 03:04:05.000"}`) {
			t.Errorf("first line %q does not start at --start", sc.Text())
		}
		n++
	}
	if n != 1000 {
		t.Errorf("%d lines, want 1000", n)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
	var stdout bytes.Buffer
	if err := run([]string{"--events", "3"}, &stdout, &stderr); err != nil || strings.Count(stdout.String(), "\n") != 3 {
		t.Errorf("stdout run: err %v, output %q", err, stdout.String())
	}
	for _, args := range [][]string{{"--start", "tomorrow"}, {"--kind", "x"}, {"extra"}, {"--groups", "0"}} {
		if err := run(args, &bytes.Buffer{}, &stderr); err == nil {
			t.Errorf("run(%q) succeeded, want an error", args)
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	for _, kind := range []Kind{KindMerchant, KindBids} {
		b.Run(string(kind), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Kind = kind
			cfg.Events = int64(b.N)
			b.ReportAllocs()
			b.ResetTimer()
			if _, err := Generate(discard{}, cfg); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestQueriesMatchWorkload checks that each bench/queries file declares its
// source with the generator's fields, in the generator's order.
func TestQueriesMatchWorkload(t *testing.T) {
	fieldsOf := func(kind Kind) []string {
		cfg := DefaultConfig()
		cfg.Kind = kind
		cfg.Events = 1
		b, _ := generate(t, cfg)
		d := json.NewDecoder(bytes.NewReader(b))
		var names []string
		d.Token() // {
		for d.More() {
			tok, err := d.Token()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, tok.(string))
			var skip json.RawMessage
			if err := d.Decode(&skip); err != nil {
				t.Fatal(err)
			}
		}
		return names
	}
	want := map[Kind]string{}
	for _, k := range []Kind{KindMerchant, KindBids, KindPerson, KindAuction} {
		want[k] = strings.Join(fieldsOf(k), ",")
	}
	// The relation each declaration reads, by its name.
	kindOf := map[string]Kind{"events": KindMerchant, "bids": KindBids, "person": KindPerson, "auction": KindAuction}
	files, err := filepath.Glob(filepath.Join("..", "queries", "*.sql"))
	if err != nil || len(files) != 8 {
		t.Fatalf("bench/queries: %v %v, want 8 files", files, err)
	}
	decl := regexp.MustCompile(`(?s)CREATE (?:SOURCE|TABLE) (\w+) \((.*?),\s*(?:PRIMARY KEY \(\w+\) NOT ENFORCED,\s*)?WATERMARK FOR (\w+)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms := decl.FindAllSubmatch(b, -1)
		if ms == nil {
			t.Errorf("%s: no CREATE SOURCE ... WATERMARK FOR", f)
			continue
		}
		for _, m := range ms {
			kind, ok := kindOf[string(m[1])]
			if !ok {
				t.Errorf("%s: %s is not a workload's name (%v)", f, m[1], kindOf)
				continue
			}
			var cols []string
			for _, c := range strings.Split(string(m[2]), ",") {
				cols = append(cols, strings.Fields(c)[0])
			}
			if got := strings.Join(cols, ","); got != want[kind] {
				t.Errorf("%s: %s columns %s, want the %s workload's %s", f, m[1], got, kind, want[kind])
			}
		}
	}
}
