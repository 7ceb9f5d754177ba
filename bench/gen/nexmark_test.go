package main

import (
	"bytes"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"
)

type person struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Email    string `json:"email"`
	City     string `json:"city"`
	State    string `json:"state"`
	DateTime string `json:"date_time"`
}

type auction struct {
	ID         int64  `json:"id"`
	ItemName   string `json:"item_name"`
	Seller     int64  `json:"seller"`
	Category   int64  `json:"category"`
	InitialBid int64  `json:"initial_bid"`
	Reserve    int64  `json:"reserve"`
	DateTime   string `json:"date_time"`
	Expires    string `json:"expires"`
}

// TestNexmarkGolden pins the first lines of the person and auction streams.
func TestNexmarkGolden(t *testing.T) {
	want := map[Kind]string{
		KindPerson: `{"id":1000,"name":"Luke Noris","email":"rvmfrek@tjgpj.com","city":"Phoenix","state":"AZ","date_time":"2026-07-18 09:59:56.000"}
{"id":1001,"name":"Julie White","email":"ypzjwda@qjtwr.com","city":"Los Angeles","state":"CA","date_time":"2026-07-18 09:59:56.003"}
{"id":1000,"name":"Luke Noris","email":"rvmfrek@tjgpj.com","city":"Phoenix","state":"AZ","date_time":"2026-07-18 09:59:56.003"}
`,
		KindAuction: `{"id":1000,"item_name":"sskcwy","seller":2330,"category":14,"initial_bid":21491,"reserve":51059123,"date_time":"2026-07-18 10:00:00.000","expires":"2026-07-18 10:03:09.000"}
{"id":1001,"item_name":"tcrffzqr","seller":2031,"category":10,"initial_bid":20282619,"reserve":20282866,"date_time":"2026-07-18 10:00:00.001","expires":"2026-07-18 10:00:02.001"}
{"id":1002,"item_name":"lgsqziuadzeqck","seller":2128,"category":10,"initial_bid":513,"reserve":15357,"date_time":"2026-07-18 10:00:00.002","expires":"2026-07-18 10:05:08.002"}
`,
	}
	for kind, w := range want {
		cfg := DefaultConfig()
		cfg.Kind = kind
		cfg.Events = 3
		if b, _ := generate(t, cfg); string(b) != w {
			t.Errorf("%s lines:\n%s\nwant:\n%s", kind, b, w)
		}
	}
}

// TestNexmarkOwnStreams: the same seed gives the same bytes, another seed
// others, and the four kinds draw from different streams.
func TestNexmarkOwnStreams(t *testing.T) {
	for _, kind := range []Kind{KindPerson, KindAuction} {
		cfg := DefaultConfig()
		cfg.Kind = kind
		cfg.Events = 20_000
		a, _ := generate(t, cfg)
		b, _ := generate(t, cfg)
		cfg.Seed = 2
		c, _ := generate(t, cfg)
		if !bytes.Equal(a, b) || bytes.Equal(a, c) {
			t.Fatalf("%s: not deterministic by seed", kind)
		}
	}
	// The person and auction streams do not take the bid stream's draws:
	// the first auction's category and the bids' first price come from
	// different numbers.
	r := newRNG(1)
	p := newGenerator(Config{Kind: KindPerson, Seed: 1})
	a := newGenerator(Config{Kind: KindAuction, Seed: 1})
	if x := r.next(); x == p.rng.next() || x == a.rng.next() {
		t.Fatal("a Nexmark stream shares the bid stream's seed")
	}
}

func parsePersons(t *testing.T, b []byte) []person {
	t.Helper()
	var ps []person
	for _, l := range lines(b) {
		var p person
		decodeStrict(t, l, &p)
		if !bytes.HasPrefix(l, []byte(`{"id":`)) || !bytes.Contains(l, []byte(`"name":`)) {
			t.Fatalf("field order: %q", l)
		}
		ps = append(ps, p)
	}
	return ps
}

// TestPersonVersions checks the person stream as a versioned table: the
// disorder bound, one creation per id in id order, updates that keep the
// name and email, and no two versions of a person at the same time.
func TestPersonVersions(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("property seed %d", seed)
	pick := rand.New(rand.NewPCG(seed, 11))
	for round := 0; round < 4; round++ {
		cfg := DefaultConfig()
		cfg.Kind = KindPerson
		cfg.Seed = pick.Uint64()
		cfg.Events = 20_000 + pick.Int64N(20_000)
		cfg.Disorder = time.Duration(pick.IntN(6000)) * time.Millisecond
		cfg.LateFrac = pick.Float64()
		cfg.UpdateRate = []float64{0.1, 0.5, 0}[round%3]
		cfg.Groups = 1 + pick.IntN(20_000)
		cfg.Dist = []Dist{DistZipf, DistUniform}[pick.IntN(2)]
		b, st := generate(t, cfg)
		ps := parsePersons(t, b)
		if int64(len(ps)) != cfg.Events || st.Lines != cfg.Events {
			t.Fatalf("seed %d: %d lines, want %d", cfg.Seed, len(ps), cfg.Events)
		}
		first := map[int64]person{}
		times := map[int64]map[string]bool{}
		next := int64(nexmarkFirstID)
		var maxSeen time.Time
		updates := 0
		for _, p := range ps {
			at := parseTime(t, p.DateTime)
			if at.After(maxSeen) {
				maxSeen = at
			}
			if lag := maxSeen.Sub(at); lag > cfg.Disorder {
				t.Fatalf("seed %d: %+v trails the max by %v > %v", cfg.Seed, p, lag, cfg.Disorder)
			}
			f, ok := first[p.ID]
			switch {
			case !ok && p.ID != next:
				t.Fatalf("seed %d: person %d created, want %d next", cfg.Seed, p.ID, next)
			case !ok:
				first[p.ID] = p
				times[p.ID] = map[string]bool{}
				next++
				base := cfg.Start.Add(-cfg.Disorder + time.Duration(personEveryMS*(p.ID-nexmarkFirstID))*time.Millisecond)
				if at.After(base) || base.Sub(at) > cfg.Disorder {
					t.Fatalf("seed %d: person %d created at %v, base %v", cfg.Seed, p.ID, at, base)
				}
			default:
				updates++
				if p.Name != f.Name || p.Email != f.Email {
					t.Fatalf("seed %d: an update of %+v is %+v", cfg.Seed, f, p)
				}
				if !at.After(parseTime(t, f.DateTime)) {
					t.Fatalf("seed %d: an update of %+v at %s", cfg.Seed, f, p.DateTime)
				}
			}
			if times[p.ID][p.DateTime] {
				t.Fatalf("seed %d: two versions of person %d at %s", cfg.Seed, p.ID, p.DateTime)
			}
			times[p.ID][p.DateTime] = true
			if !strings.Contains(p.Email, "@") || !strings.HasSuffix(p.Email, ".com") || p.State == "" {
				t.Fatalf("fields of %+v", p)
			}
		}
		if int64(updates) != st.Updates {
			t.Fatalf("seed %d: %d updates, stats say %d", cfg.Seed, updates, st.Updates)
		}
		creations := float64(len(first))
		if want := cfg.UpdateRate * creations; updates < int(want*0.8)-20 || updates > int(want*1.2)+20 {
			t.Errorf("seed %d: %d updates over %.0f creations, want about %.0f", cfg.Seed, updates, creations, want)
		}
	}
}

// TestAuctionSellers checks that every auction's seller has a version at or
// before the auction's time in the person file of the same settings, and
// that the version valid then is often not the seller's last one: the
// temporal join changes the answer.
func TestAuctionSellers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kind = KindPerson
	cfg.Events = 60_000
	pb, _ := generate(t, cfg)
	vers := map[int64][]person{}
	for _, p := range parsePersons(t, pb) {
		vers[p.ID] = append(vers[p.ID], p)
	}
	for _, v := range vers {
		sort.Slice(v, func(i, j int) bool { return v[i].DateTime < v[j].DateTime })
	}
	cfg.Kind = KindAuction
	cfg.Events = 100_000
	ab, st := generate(t, cfg)
	if st.Duplicates == 0 || st.Delayed == 0 {
		t.Fatalf("auctions: stats %+v, want delays and duplicates", st)
	}
	stale, cat10 := 0, 0
	var maxSeen time.Time
	for _, l := range lines(ab) {
		var a auction
		decodeStrict(t, l, &a)
		at := parseTime(t, a.DateTime)
		if at.After(maxSeen) {
			maxSeen = at
		}
		if lag := maxSeen.Sub(at); lag > cfg.Disorder {
			t.Fatalf("%s trails the max by %v", l, lag)
		}
		v := vers[a.Seller]
		i := sort.Search(len(v), func(i int) bool { return v[i].DateTime > a.DateTime }) - 1
		if i < 0 {
			t.Fatalf("auction %s: seller %d has no version at or before it (%d versions)", l, a.Seller, len(v))
		}
		if v[i].State != v[len(v)-1].State {
			stale++
		}
		if a.Category < firstCategory || a.Category >= firstCategory+categories {
			t.Fatalf("category of %s", l)
		}
		if a.Category == firstCategory {
			cat10++
		}
		if a.Reserve < a.InitialBid || a.InitialBid < 100 || !parseTime(t, a.Expires).After(at) || len(a.ItemName) < 5 {
			t.Fatalf("fields of %s", l)
		}
	}
	if frac := float64(stale) / float64(cfg.Events); frac < 0.01 {
		t.Errorf("%.4f of the auctions' sellers were in another state when the auction opened than at the end: the temporal join hardly matters", frac)
	}
	if frac := float64(cat10) / float64(cfg.Events); frac < 0.18 || frac > 0.22 {
		t.Errorf("category 10: %.3f of the auctions, want about 0.2", frac)
	}
}
