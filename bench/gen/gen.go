package main

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Kind names a workload.
type Kind string

// The workloads.
const (
	// KindMerchant is the standard query's input:
	// {"event_id","merchant","customer","amount","event_time"}.
	KindMerchant Kind = "merchant"
	// KindBids is a Nexmark-style bid stream:
	// {"auction","bidder","price","channel","url","date_time"}.
	KindBids Kind = "bids"
	// KindPerson is Nexmark's person stream, usable as a versioned table
	// (PRIMARY KEY id, event time date_time):
	// {"id","name","email","city","state","date_time"}. Person p is created
	// at Start + 3p ms (Nexmark's one person per three auctions); a fraction
	// UpdateRate of the creations is followed by a new version of an older
	// person (a move: a new city and state, the same name and email).
	KindPerson Kind = "person"
	// KindAuction is Nexmark's auction stream:
	// {"id","item_name","seller","category","initial_bid","reserve","date_time","expires"}.
	// Auction i is at Start + i ms (delayed and re-sent as bids are); its
	// seller is a person that the person stream of the same Start has
	// created by then.
	KindAuction Kind = "auction"
)

// Dist names how keys (merchants, auctions, bidders) are drawn.
type Dist string

// The key distributions.
const (
	// DistZipf draws key k (0-based) with probability proportional to (k+1)^-s.
	DistZipf Dist = "zipf"
	// DistUniform draws every key with the same probability; the scaling runs
	// use it so that the number of distinct keys seen is close to --groups.
	DistUniform Dist = "uniform"
)

// Config is the whole description of a workload: the same Config gives the
// same bytes.
type Config struct {
	Kind   Kind   // default KindMerchant
	Events int64  // lines written, duplicates included; default 1,000,000
	Seed   uint64 // default 1
	// Groups is the number of distinct merchants (merchant) or of distinct
	// auctions and of distinct bidders (bids). Default 10,000.
	Groups int
	Dist   Dist    // default DistZipf
	ZipfS  float64 // Zipf exponent, > 1; default 1.1
	// Disorder bounds how far an event's time may trail the largest event
	// time written before it. Default 4 s: a watermark delay of 5 s sees no
	// late event. Millisecond resolution.
	Disorder time.Duration
	// LateFrac is the fraction of events whose time is moved back by a
	// uniform delay in [1 ms, Disorder]. Default 0.1.
	LateFrac float64
	// DupRate is the probability that an event is re-sent once, unchanged,
	// later in the stream (but never later than Disorder allows). Default 0.001.
	DupRate float64
	// Start is the event time of the first event, UTC. Default 2026-07-18 10:00:00.
	Start time.Time
	// UpdateRate (person only) is the probability that a person's creation
	// is followed by a new version of an older person. Default 0.1.
	UpdateRate float64
}

// DefaultConfig returns the standard workload of docs/performance.md.
func DefaultConfig() Config {
	return Config{
		Kind:     KindMerchant,
		Events:   1_000_000,
		Seed:     1,
		Groups:   10_000,
		Dist:     DistZipf,
		ZipfS:    1.1,
		Disorder: 4 * time.Second,
		LateFrac: 0.1,
		DupRate:  0.001,
		Start:    time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC),

		UpdateRate: 0.1,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Kind != KindMerchant && c.Kind != KindBids && c.Kind != KindPerson && c.Kind != KindAuction:
		return fmt.Errorf("%w: kind %q: want merchant, bids, person or auction", ErrConfig, c.Kind)
	case c.Events < 0:
		return fmt.Errorf("%w: events %d < 0", ErrConfig, c.Events)
	case c.Groups < 1:
		return fmt.Errorf("%w: groups %d < 1", ErrConfig, c.Groups)
	case c.Dist != DistZipf && c.Dist != DistUniform:
		return fmt.Errorf("%w: dist %q: want zipf or uniform", ErrConfig, c.Dist)
	case c.Dist == DistZipf && !(c.ZipfS > 1 && c.ZipfS < 100):
		return fmt.Errorf("%w: zipf-s %v: want 1 < s < 100", ErrConfig, c.ZipfS)
	case c.Disorder < 0 || c.Disorder > time.Hour:
		return fmt.Errorf("%w: disorder %v: want 0 to 1h", ErrConfig, c.Disorder)
	case !(c.LateFrac >= 0 && c.LateFrac <= 1):
		return fmt.Errorf("%w: late-frac %v: want 0 to 1", ErrConfig, c.LateFrac)
	case !(c.DupRate >= 0 && c.DupRate < 1):
		return fmt.Errorf("%w: dup-rate %v: want 0 <= rate < 1", ErrConfig, c.DupRate)
	case !(c.UpdateRate >= 0 && c.UpdateRate <= 1):
		return fmt.Errorf("%w: update-rate %v: want 0 to 1", ErrConfig, c.UpdateRate)
	case c.Start.Year() < 1970 || c.Start.Year() > 9000:
		return fmt.Errorf("%w: start %v: want a year from 1970 to 9000", ErrConfig, c.Start)
	}
	return nil
}

// Stats describes what Generate wrote.
type Stats struct {
	Lines      int64 // lines written
	Duplicates int64 // re-sent lines among them
	Delayed    int64 // fresh events whose time was moved back
	Updates    int64 // person: new versions of an existing person among the lines
}

// Generate writes cfg.Events JSON lines to w. w should be buffered: Generate
// calls Write once per line.
//
// Time model: fresh event number i (from 0) has the base time Start + i ms.
// With probability LateFrac its time is moved back by a delay d uniform in
// [1, Disorder] ms. With probability DupRate it is re-sent, byte for byte,
// after the fresh event of a later slot j with (j-i) + d <= Disorder, so no
// line's time trails the largest time written before it by more than
// Disorder.
func Generate(w io.Writer, cfg Config) (Stats, error) {
	var st Stats
	if err := cfg.Validate(); err != nil {
		return st, err
	}
	if cfg.Kind == KindPerson {
		return generatePersons(w, cfg)
	}
	g := newGenerator(cfg)
	disorderMS := cfg.Disorder.Milliseconds()
	startMS := cfg.Start.UnixMilli()
	var pending dupQueue
	buf := make([]byte, 0, 512)
	for slot := int64(0); st.Lines < cfg.Events; slot++ {
		var delay int64
		if cfg.LateFrac > 0 && disorderMS > 0 && g.rng.float64() < cfg.LateFrac {
			delay = 1 + int64(g.rng.bounded(uint64(disorderMS)))
			st.Delayed++
		}
		buf = g.appendEvent(buf[:0], slot, startMS+slot-delay)
		if _, err := w.Write(buf); err != nil {
			return st, err
		}
		st.Lines++
		if cfg.DupRate > 0 && g.rng.float64() < cfg.DupRate {
			lag := int64(g.rng.bounded(uint64(disorderMS-delay) + 1))
			pending.push(slot+lag, buf)
		}
		for st.Lines < cfg.Events {
			line, ok := pending.pop(slot)
			if !ok {
				break
			}
			if _, err := w.Write(line); err != nil {
				return st, err
			}
			st.Lines++
			st.Duplicates++
		}
	}
	return st, nil
}

// hotChannels are the Nexmark generator's four hot channels.
var hotChannels = [...]string{"Google", "Facebook", "Baidu", "Apple"}

// Nexmark numbers auctions and people from 1000.
const nexmarkFirstID = 1000

// customers is the number of distinct customers in the merchant workload.
const customers = 100_000

type generator struct {
	cfg     Config
	rng     rng
	zipf    zipf
	idMask  uint64
	lastSec int64
	secText []byte // "YYYY-MM-DD HH:MM:SS" of lastSec
}

func newGenerator(cfg Config) *generator {
	seed := cfg.Seed
	switch cfg.Kind { // the Nexmark streams have their own seed streams
	case KindPerson:
		seed = mix64(seed ^ 0x70657273)
	case KindAuction:
		seed = mix64(seed ^ 0x61756374)
	}
	g := &generator{cfg: cfg, rng: newRNG(seed), lastSec: math.MinInt64}
	g.idMask = splitmix(&[]uint64{cfg.Seed ^ 0x5bd1e995}[0])
	if cfg.Dist == DistZipf {
		g.zipf = newZipf(cfg.ZipfS, uint64(cfg.Groups-1))
	}
	return g
}

func (g *generator) key() uint64 {
	if g.cfg.Dist == DistUniform {
		return g.rng.bounded(uint64(g.cfg.Groups))
	}
	return g.zipf.next(&g.rng)
}

func (g *generator) appendEvent(b []byte, n, ms int64) []byte {
	switch g.cfg.Kind {
	case KindBids:
		return g.appendBid(b, ms)
	case KindAuction:
		return g.appendAuction(b, n, ms)
	}
	return g.appendMerchant(b, n, ms)
}

func (g *generator) appendMerchant(b []byte, n, ms int64) []byte {
	b = append(b, `{"event_id":"`...)
	b = appendHex16(b, mix64(uint64(n)^g.idMask))
	b = append(b, `","merchant":"m`...)
	b = strconv.AppendUint(b, g.key(), 10)
	b = append(b, `","customer":"c`...)
	b = strconv.AppendUint(b, g.rng.bounded(customers), 10)
	b = append(b, `","amount":`...)
	// 1.00 to 999.99, skewed to small amounts (the square of a uniform).
	u := g.rng.float64()
	cents := 100 + uint64(u*u*99_900)
	b = strconv.AppendUint(b, cents/100, 10)
	b = append(b, '.', byte('0'+cents/10%10), byte('0'+cents%10))
	b = append(b, `,"event_time":"`...)
	b = g.appendTime(b, ms)
	return append(b, "\"}\n"...)
}

func (g *generator) appendBid(b []byte, ms int64) []byte {
	b = append(b, `{"auction":`...)
	b = strconv.AppendUint(b, nexmarkFirstID+g.key(), 10)
	b = append(b, `,"bidder":`...)
	b = strconv.AppendUint(b, nexmarkFirstID+g.key(), 10)
	b = append(b, `,"price":`...)
	// Nexmark's price: round(10^(6u) * 100) cents.
	b = strconv.AppendInt(b, int64(math.Round(math.Pow(10, g.rng.float64()*6)*100)), 10)
	// As in Nexmark, 9 bids in 10 come from one of four hot channels.
	b = append(b, `,"channel":"`...)
	if g.rng.bounded(10) > 0 {
		ch := hotChannels[g.rng.bounded(uint64(len(hotChannels)))]
		b = append(b, ch...)
		b = append(b, `","url":"https://www.nexmark.com/`...)
		b = append(b, ch...)
		b = append(b, `/item.htm?query=1`...)
	} else {
		id := g.rng.bounded(10_000)
		b = append(b, "channel-"...)
		b = strconv.AppendUint(b, id, 10)
		b = append(b, `","url":"https://www.nexmark.com/channel-`...)
		b = strconv.AppendUint(b, id, 10)
		b = append(b, `/item.htm?query=1&channel_id=`...)
		b = strconv.AppendUint(b, id, 10)
	}
	b = append(b, `","date_time":"`...)
	b = g.appendTime(b, ms)
	return append(b, "\"}\n"...)
}

// appendTime appends "YYYY-MM-DD HH:MM:SS.mmm" for ms since the epoch; the
// seconds text is cached because consecutive events share it.
func (g *generator) appendTime(b []byte, ms int64) []byte {
	sec, milli := ms/1000, ms%1000
	if milli < 0 {
		sec, milli = sec-1, milli+1000
	}
	if sec != g.lastSec {
		g.secText = time.Unix(sec, 0).UTC().AppendFormat(g.secText[:0], "2006-01-02 15:04:05")
		g.lastSec = sec
	}
	b = append(b, g.secText...)
	return append(b, '.', byte('0'+milli/100), byte('0'+milli/10%10), byte('0'+milli%10))
}

const hexDigits = "0123456789abcdef"

func appendHex16(b []byte, x uint64) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[x>>uint(shift)&0xf])
	}
	return b
}

// dupQueue holds the lines waiting to be re-sent, ordered by due slot (ties
// in scheduling order). It holds about DupRate * Disorder/1ms lines.
type dupQueue struct {
	items []dupItem
}

type dupItem struct {
	due  int64
	line []byte
}

func (q *dupQueue) push(due int64, line []byte) {
	i := len(q.items)
	for i > 0 && q.items[i-1].due > due {
		i--
	}
	q.items = append(q.items, dupItem{})
	copy(q.items[i+1:], q.items[i:])
	q.items[i] = dupItem{due: due, line: append([]byte(nil), line...)}
}

func (q *dupQueue) pop(slot int64) ([]byte, bool) {
	if len(q.items) == 0 || q.items[0].due > slot {
		return nil, false
	}
	line := q.items[0].line
	q.items = q.items[1:]
	return line, true
}

// rng is xoshiro256**: written out here so that a seed's bytes do not depend
// on the standard library's choice of algorithms.
type rng struct{ s [4]uint64 }

func newRNG(seed uint64) rng {
	var r rng
	x := seed
	for i := range r.s {
		r.s[i] = splitmix(&x)
	}
	return r
}

func splitmix(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	return mix64(*x)
}

// mix64 is splitmix64's finalizer, a bijection on uint64.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *rng) next() uint64 {
	s := &r.s
	result := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return result
}

// bounded returns a number in [0, n) (Lemire's multiply-high; the bias is
// below 2^-40 for the n used here).
func (r *rng) bounded(n uint64) uint64 {
	hi, _ := bits.Mul64(r.next(), n)
	return hi
}

// float64 returns a number in [0, 1).
func (r *rng) float64() float64 {
	return float64(r.next()>>11) * 0x1p-53
}

// zipf draws k in [0, imax] with P(k) proportional to (k+1)^-s by
// rejection-inversion (Hörmann and Derflinger 1996), in O(1) memory so that
// 10M keys cost nothing to set up.
type zipf struct {
	imax, q, oneMinusQ, oneMinusQInv float64
	hxm, hx0MinusHxm, s              float64
}

func newZipf(s float64, imax uint64) zipf {
	z := zipf{imax: float64(imax), q: s, oneMinusQ: 1 - s, oneMinusQInv: 1 / (1 - s)}
	z.hxm = z.h(z.imax + 0.5)
	z.hx0MinusHxm = z.h(0.5) - 1 - z.hxm // (v=1)^-q = 1
	z.s = 1 - z.hinv(z.h(1.5)-math.Exp(-z.q*math.Log(2)))
	return z
}

func (z *zipf) h(x float64) float64 {
	return math.Exp(z.oneMinusQ*math.Log(1+x)) * z.oneMinusQInv
}

func (z *zipf) hinv(x float64) float64 {
	return math.Exp(z.oneMinusQInv*math.Log(z.oneMinusQ*x)) - 1
}

func (z *zipf) next(r *rng) uint64 {
	if z.imax == 0 {
		return 0
	}
	for {
		ur := z.hxm + r.float64()*z.hx0MinusHxm
		x := z.hinv(ur)
		k := math.Floor(x + 0.5)
		if k < 0 || k > z.imax {
			continue
		}
		if k-x <= z.s || ur >= z.h(k+0.5)-math.Exp(-math.Log(k+1)*z.q) {
			return uint64(k)
		}
	}
}
