package drive

import (
	"bytes"
	"strings"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/types"
)

// Decoding ahead (Driver.Prefetch). A host that reads two inputs
// interleaves them by their watermarks, which it reads after every record
// it pushes (Config.RecordWatermark): each record is decoded before its
// push returns, so the block path, which decodes on the shards later,
// cannot serve it, and on several threads the host's goroutine would
// decode every record itself. Such a host knows its next records before
// it pushes them (it reads its files ahead): it hands them to Prefetch,
// which decodes them in blocks on goroutines of their own while the host
// pushes the records before them. A push then takes its record's decoded
// row instead of decoding it. Everything else a push does (the counters,
// the watermark, a malformed record's outcome) is unchanged, so the
// changelog and the watermark after every record are what they are
// without it.
//
// Bounds: at most aheadBlocks blocks of aheadRecords records wait, and
// at most aheadDecoders of them decode at once; a prefetch beyond is
// refused and its record decoded at its push. A push of any other record
// than the next one prefetched (the host read differently) drops every
// record prefetched: each is then decoded at its push.

const (
	aheadRecords  = 256
	aheadBlocks   = 8
	aheadDecoders = 2
)

// ahead is a decode node's records decoded ahead of their push.
type ahead struct {
	decs    chan *exec.Decoder // the free decoders
	fill    *aheadBlock        // being filled, not yet decoding
	blocks  []*aheadBlock      // decoding or decoded, in input order
	next    int                // blocks[0]'s next record
	waiting int                // records prefetched and not yet pushed
	free    []*aheadBlock      // blocks taken whole, to fill again
}

// aheadBlock is a block of prefetched records and, once done is closed,
// each one's decoded row or error.
type aheadBlock struct {
	raw  []byte  // the records, back to back
	ends []int32 // each record's end in raw
	rows []types.Value
	offs []int32 // record i's row is rows[offs[i]:offs[i+1]]
	errs []error // record i's decode error
	err  error   // a panic of the decoder: the block is not used
	done chan struct{}
}

// newAhead returns the prefetch of a decode node whose decoder newDec
// makes (one per goroutine decoding at once).
func newAhead(newDec func() *exec.Decoder) *ahead {
	a := &ahead{decs: make(chan *exec.Decoder, aheadDecoders)}
	for range aheadDecoders {
		a.decs <- newDec()
	}
	return a
}

// add takes a copy of raw to decode ahead; false: the bound is reached.
func (a *ahead) add(raw []byte) bool {
	if a.waiting >= aheadBlocks*aheadRecords {
		return false
	}
	if a.fill == nil {
		a.fill = a.newBlock()
	}
	b := a.fill
	b.raw = append(b.raw, raw...)
	b.ends = append(b.ends, int32(len(b.raw)))
	a.waiting++
	if len(b.ends) == aheadRecords {
		a.submit()
	}
	return true
}

// newBlock returns an empty block, reusing one taken whole: its rows
// reached only the sharded aggregate, which copies what it keeps.
func (a *ahead) newBlock() *aheadBlock {
	if n := len(a.free); n > 0 {
		b := a.free[n-1]
		a.free = a.free[:n-1]
		b.raw, b.ends, b.rows, b.offs, b.errs, b.err, b.done = b.raw[:0], b.ends[:0], b.rows[:0], b.offs[:0], b.errs[:0], nil, nil
		return b
	}
	return &aheadBlock{raw: make([]byte, 0, 64<<10), ends: make([]int32, 0, aheadRecords),
		offs: make([]int32, 0, aheadRecords+1), errs: make([]error, 0, aheadRecords)}
}

// submit starts decoding the block being filled. The goroutine holds the
// block and the decoders only, so a dropped driver leaves none behind
// once its blocks are decoded.
func (a *ahead) submit() {
	b := a.fill
	a.fill = nil
	b.done = make(chan struct{})
	a.blocks = append(a.blocks, b)
	decs := a.decs
	go func() {
		dec := <-decs
		b.decode(dec)
		decs <- dec
		close(b.done)
	}()
}

func (b *aheadBlock) decode(dec *exec.Decoder) {
	defer Recover(&b.err)
	start := int32(0)
	b.offs = append(b.offs, 0)
	for _, end := range b.ends {
		row, err := dec.Decode(b.raw[start:end:end])
		start = end
		b.errs = append(b.errs, err)
		for _, c := range row {
			// The decoder's scratch is reused: a string outside the
			// block's own bytes (one it unescaped) is copied.
			if c.S != "" && !within(b.raw, c.S) {
				c.S = strings.Clone(c.S)
			}
			b.rows = append(b.rows, c)
		}
		b.offs = append(b.offs, int32(len(b.rows)))
	}
}

// take returns raw's decoded row and decode error when raw is the next
// record prefetched (ok); otherwise it drops everything prefetched.
func (a *ahead) take(raw []byte) (row []types.Value, err error, ok bool) {
	if a == nil || a.waiting == 0 {
		return nil, nil, false
	}
	if len(a.blocks) == 0 {
		a.submit()
	}
	b := a.blocks[0]
	<-b.done
	i := a.next
	start := int32(0)
	if i > 0 {
		start = b.ends[i-1]
	}
	if b.err != nil || !bytes.Equal(b.raw[start:b.ends[i]], raw) {
		a.drop()
		return nil, nil, false
	}
	a.waiting--
	if a.next++; a.next == len(b.ends) {
		a.blocks[0] = nil
		a.blocks, a.next = a.blocks[1:], 0
		// Filled again only by a later Prefetch, after this push.
		a.free = append(a.free, b)
	}
	if err := b.errs[i]; err != nil || b.offs[i] == b.offs[i+1] {
		return nil, err, true // a decode error, or a header record
	}
	return b.rows[b.offs[i]:b.offs[i+1]:b.offs[i+1]], nil, true
}

// drop forgets every record prefetched (blocks still decoding finish on
// their own).
func (a *ahead) drop() {
	a.fill, a.blocks, a.next, a.waiting = nil, nil, 0, 0
}

// Prefetch hands over a record that a later Push (or Feed) will bring, so
// that it is decoded ahead, on another goroutine (see above). It reports
// whether the record was taken: only a driver on several threads that
// decodes each record at its push (Config.RecordWatermark, its own JSON
// decoder, no join) takes records, up to its bound. raw is copied.
func (d *Driver) Prefetch(raw []byte) bool {
	if d.in.ahead == nil || d.fatal != nil || d.closed {
		return false
	}
	return d.in.ahead.add(raw)
}

// Prefetch hands a record of input i that a later push will bring to the
// roots that decode ahead (Driver.Prefetch); it reports whether any took
// it.
func (g *Graph) Prefetch(i int, raw []byte) bool {
	took := false
	for _, n := range g.rootsOf(i) {
		took = n.d.Prefetch(raw) || took
	}
	return took
}
