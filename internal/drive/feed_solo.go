package drive

import (
	"errors"
	"slices"
	"unsafe"

	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// soloFeed is the decode node of a driver on one thread whose host feeds
// it records (Feed) and hears of their outcomes through
// Config.OnEventError: the records of a block are decoded one after the
// other, then their rows are folded into the aggregate one after the
// other. Decoding and folding an event in turn ran the decoder's code and
// the operator's through the instruction cache for every event, and the
// two did not fit it together: a block keeps each one's code resident
// while its loop runs (bench/results/2026-12-07-one-thread-icache.md).
//
// Everything an event does happens as it did, in input order: its
// counters as it is decoded, its row folded, its outcome reported with
// its own sequence number and tag; only later, when the block is full or
// at the next call of the driver that is not a Feed (every other call
// sequences the block first: drain). A string cell the decoder did not
// leave in the record (one it unescaped) is copied into the block.
//
// A host asks for it with Config.BlockEvents (the block's most records;
// it is cut sooner at soloBlockBytes), since the outcomes then reach
// OnEventError up to a block late rather than before Feed returns. Only
// where nothing can refuse a row mid-block and nothing else needs the
// call an event was fed in: a host that delivers records through
// Emit (never out of room), not Strict (whose first event error stops
// the driver at that event), without late hooks (a host may place a late
// event by the Feed it came during), JSON lines (a CSV header that does
// not fit the source is the error of the Feed that handed it over), and
// a driver that is a graph of its own (NewQueryGraph: no other node
// orders its steps against the fed records) with a single aggregate at
// its head.
type soloFeed struct {
	d    *Driver
	raw  []byte  // the records, back to back
	ends []int   // each record's end in raw
	tags []int64 // the host's tags
	recs []soloRec
	// cells are the rows, ncol a row; strs holds the strings copied, and
	// fixes (cell, offset, length) where they go once strs stops growing.
	cells []types.Value
	ncol  int
	strs  []byte
	fixes []int32
	// strCols are the columns whose strings own checks (stringCols).
	strCols []int
	busy    bool // sequencing: calls made by the fold do not sequence again
	max     int  // Config.BlockEvents
}

// soloRec is a decoded record: its row's first cell (-1: no row), the
// event's sequence number, and its decoding error.
type soloRec struct {
	cell int32
	seq  int64
	err  error
}

// soloBlockBytes cuts a block of long records sooner.
const soloBlockBytes = 256 << 10

// useSoloFeed gives d a block feed where one fits (see soloFeed).
func (d *Driver) useSoloFeed(cfg Config) {
	if _, ok := d.feeder.(direct); !ok || d.solo == nil {
		return
	}
	if cfg.BlockEvents < 2 || cfg.OnEventError == nil || cfg.Emit == nil || cfg.Strict || cfg.OnRow != nil || cfg.Late != nil || cfg.LateTable != nil || d.in.dec.IsCSV() {
		return
	}
	f := &soloFeed{d: d, max: cfg.BlockEvents, strCols: stringCols(d.in.src, d.in.dec)}
	d.feeder, d.fed = f, f
}

// settleFed sequences the records fed to a block feed (soloFeed) before
// any other call of the driver works on its state. Its error is fatal
// (an event's goes to OnEventError): a call that cannot return it (Stats)
// leaves it to the driver's next call.
func (d *Driver) settleFed() error {
	if f := d.fed; f != nil && len(f.ends) > 0 {
		return f.drain()
	}
	return nil
}

func (f *soloFeed) feed(raw []byte, tag int64) error {
	d := f.d
	if d.fatal != nil {
		return d.fatal
	}
	if d.closed {
		return ErrClosed
	}
	f.raw = append(f.raw, raw...)
	f.ends = append(f.ends, len(f.raw))
	f.tags = append(f.tags, tag)
	if len(f.ends) >= f.max || len(f.raw) >= soloBlockBytes {
		return f.drain()
	}
	return nil
}

func (f *soloFeed) reportAt(tag int64, err error) error {
	if derr := f.drain(); derr != nil {
		return derr
	}
	return direct{f.d}.reportAt(tag, err)
}

func (f *soloFeed) outcome(err error, tag int64, raw []byte) error {
	return direct{f.d}.outcome(err, tag, raw)
}

// drain decodes and folds every record fed so far.
func (f *soloFeed) drain() error {
	if f.busy || len(f.ends) == 0 {
		return nil
	}
	f.busy = true
	defer f.reset()
	if err := f.decode(); err != nil {
		return err
	}
	return f.fold()
}

func (f *soloFeed) reset() {
	f.raw, f.ends, f.tags, f.recs = f.raw[:0], f.ends[:0], f.tags[:0], f.recs[:0]
	// The cells are not cleared: their strings point into raw and strs,
	// which the feed keeps anyway (or into what they were before they
	// last grew), and the next block writes over them.
	f.cells, f.strs, f.fixes = f.cells[:0], f.strs[:0], f.fixes[:0]
	f.busy = false
}

// decode decodes the block's records into rows, counting them. The
// decoder writes each row in its place in the block (exec.Decoder.UseRow):
// copying the rows there cost about a fifth of a one-thread run's extra
// instructions over decoding one record at a time.
func (f *soloFeed) decode() error {
	d := f.d
	dec := d.in.dec
	w := dec.Width()
	defer dec.UseRow(dec.UseRow(nil)) // the decoder's own row back after the block
	// Room for every row, so no row moves while the block is decoded.
	f.cells = slices.Grow(f.cells[:0], len(f.ends)*max(w, len(d.in.src.Columns)))
	start := 0
	for _, end := range f.ends {
		at := len(f.cells)
		f.cells = f.cells[:at+w]
		dec.UseRow(f.cells[at : at+w : at+w])
		row, err := d.decode(f.raw[start:end])
		start = end
		if err != nil && d.fatal != nil {
			return err
		}
		rec := soloRec{cell: -1, seq: d.n.Events, err: err}
		switch {
		case row == nil:
			f.cells = f.cells[:at]
		case len(row) == w && &row[0] == &f.cells[at]:
			rec.cell = int32(at)
			f.ncol = w
			if len(f.strCols) > 0 {
				f.own(at)
			}
		default: // a deriver's row (computed columns)
			rec.cell = int32(at)
			f.cells = f.cells[:at]
			f.keep(row)
		}
		f.recs = append(f.recs, rec)
	}
	for k := 0; k < len(f.fixes); k += 3 {
		off, n := f.fixes[k+1], f.fixes[k+2]
		f.cells[f.fixes[k]].S = unsafe.String(&f.strs[off], n)
	}
	return nil
}

// own copies into strs each string of the row at cell at that does not
// lie in the records (one the decoder unescaped into its own buffer).
func (f *soloFeed) own(at int) {
	row := f.cells[at : at+f.ncol]
	for _, i := range f.strCols {
		if s := row[i].S; len(s) > 0 && !within(f.raw, s) {
			f.fixes = append(f.fixes, int32(at+i), int32(len(f.strs)), int32(len(s)))
			f.strs = append(f.strs, s...)
			row[i].S = ""
		}
	}
}

// stringCols are the columns of src whose cells may hold a string: the
// VARCHAR ones (types.Value) dec converts, the others being NULL. The
// source's columns are the row's, the decoder having no computed ones.
func stringCols(src *plan.Source, dec *exec.Decoder) []int {
	out := []int{}
	for i, c := range src.Columns {
		if c.Type.Kind == types.KindVarchar && dec.Converts(i) {
			out = append(out, i)
		}
	}
	return out
}

// keep copies row into the block's cells, and a string that does not lie
// in the records into strs.
func (f *soloFeed) keep(row []types.Value) {
	f.ncol = len(row)
	for _, c := range row {
		if len(c.S) > 0 && !within(f.raw, c.S) {
			f.fixes = append(f.fixes, int32(len(f.cells)), int32(len(f.strs)), int32(len(c.S)))
			f.strs = append(f.strs, c.S...)
			c.S = ""
		}
		f.cells = append(f.cells, c)
	}
}

// fold pushes the rows to the aggregate and reports every outcome, in
// input order.
func (f *soloFeed) fold() error {
	d := f.d
	start := 0
	for i, rec := range f.recs {
		raw := f.raw[start:f.ends[i]]
		start = f.ends[i]
		if d.fatal != nil {
			return d.fatal
		}
		err := rec.err
		if err == nil && rec.cell >= 0 {
			err = d.solo.pushOne(f.cells[rec.cell:int(rec.cell)+f.ncol], raw, nil, false)
		}
		if err == nil {
			continue
		}
		var ee *EventError
		if errors.As(err, &ee) {
			ee.Seq = rec.seq // the event's own, not the block's last
		}
		if err := f.outcome(err, f.tags[i], raw); err != nil {
			return err
		}
	}
	return nil
}
