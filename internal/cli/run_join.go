package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubiksql/ubik"
)

// A query with a temporal join reads two files: the stream (--input or its
// source's path) and the versioned table (its CREATE TABLE's path, JSON
// lines or CSV per its format). The table file is read first, whole,
// then the table input ends and the stream is read: the join's result
// does not depend on how its inputs interleave, and with the table ended
// no event waits. A table row behind the table's own watermark (the file
// out of order by more than its delay) is late: counted, written to
// --late-output, not applied. With --state-dir the versions are part of
// the checkpoint, so a resumed run does not read the table again.

// loadTable pushes the table file of q's join, then ends the table input.
// curLine is the late output's line number; onBad receives each malformed
// row (its error, a crossed --max-bad, stops the load).
func loadTable(q *ubik.Query, pq *planQuery, onBad func(path string, lineNo int64, row []byte, err error) error, curLine *int64) error {
	_, t, _ := pq.TemporalJoin()
	path := t.Option("path")
	if strings.EqualFold(t.Option("connector"), "kafka") {
		return fmt.Errorf("%w: table %s is a Kafka topic (connector = 'kafka'), which a Kafka run reads: give the stream from Kafka too (--source kafka://HOST:PORT/TOPIC, or connector = 'kafka' in its CREATE SOURCE) and a Kafka sink; a file run reads the table from a file (WITH (path = 'FILE'))", ErrUsage, t.Name())
	}
	if path == "" {
		return fmt.Errorf("%w: table %s has no path option: a file run reads a versioned table from WITH (path = 'FILE')", ErrUsage, t.Name())
	}
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("table %s: %w", t.Name(), err)
	}
	defer fh.Close()
	csv := strings.EqualFold(t.Option("format"), "csv")
	br := bufio.NewReaderSize(fh, 1<<20)
	var lineNo int64
	for {
		line, n, size, rerr := readRecord(br, csv)
		if len(line) == 0 && rerr != nil && !errors.Is(rerr, errTooLong) {
			if rerr != io.EOF {
				return fmt.Errorf("table %s: %w", t.Name(), rerr)
			}
			break
		}
		atStart := lineNo == 0
		lineNo += n
		if errors.Is(rerr, errTooLong) {
			// Malformed, as on the stream: the load goes on.
			if err := onBad(path, lineNo, nil, tooLongError(n, size)); err != nil {
				return err
			}
			continue
		}
		line = trimCR(line)
		if atStart {
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		if blankLine(line) {
			continue
		}
		*curLine = lineNo
		err := q.PushTable(line)
		if err == nil {
			continue
		}
		var ee *ubik.EventError
		if !errors.As(err, &ee) {
			if errors.Is(err, ubik.ErrCSVHeader) {
				return fmt.Errorf("%s:%d: %w", path, lineNo, err)
			}
			return err
		}
		if err := onBad(path, lineNo, line, ee.Err); err != nil {
			return err
		}
	}
	*curLine = 0
	return q.EndTable()
}

// joinSummary is the run summary's part for a temporal join.
type joinSummary struct {
	TableRows      int64 `json:"table_rows_read"`
	TableMalformed int64 `json:"table_malformed"`
	TableLate      int64 `json:"table_late"`
	Joined         int64 `json:"events_joined"`
	Unmatched      int64 `json:"events_unmatched"`
	JoinLate       int64 `json:"events_late_at_join"`
	BufferedPeak   int64 `json:"join_buffered_peak"`
	VersionsPeak   int64 `json:"join_versions_peak"`
	VersionsDrop   int64 `json:"join_versions_dropped"`
}

func newJoinSummary(st ubik.Stats) *joinSummary {
	j := st.Join
	return &joinSummary{TableRows: st.Table.RowsIn, TableMalformed: st.Table.Malformed, TableLate: st.Table.Late,
		Joined: j.Joined, Unmatched: j.Unmatched, JoinLate: j.LateEvents, BufferedPeak: j.BufferedPeak,
		VersionsPeak: j.VersionsPeak, VersionsDrop: j.Dropped}
}

func (j *joinSummary) text() string {
	// The table's rows read, malformed and late are the summary's second
	// input (summary.Inputs).
	return fmt.Sprintf("; join: %d events joined, %d unmatched, %d late at the join",
		j.Joined, j.Unmatched, j.JoinLate)
}

// joinMetrics are a temporal join's metrics (exported only for a query
// with a versioned table input).
type joinMetrics struct {
	tableRows, tableLate, tableMalformed, joined, unmatched, lateAtJoin *prometheus.Desc
	buffered, versions, keys, tableWM                                   *prometheus.Desc
}

func newJoinMetrics(d func(n, help string) *prometheus.Desc) joinMetrics {
	return joinMetrics{
		tableRows:      d("table_rows_read_total", "Rows read from the versioned table input of a temporal join."),
		tableLate:      d("table_rows_late_total", "Table rows behind the table's watermark (not applied)."),
		tableMalformed: d("table_rows_malformed_total", "Table rows that could not be decoded or have a NULL primary key cell."),
		joined:         d("join_events_joined_total", "Events joined with a version of their key."),
		unmatched:      d("join_events_unmatched_total", "Events with no version (dropped by JOIN, NULL-extended by LEFT JOIN)."),
		lateAtJoin:     d("join_events_late_total", "Events behind the stream watermark less the allowed lateness at the join."),
		buffered:       d("join_buffered_events", "Events waiting for the table's watermark to pass their time."),
		versions:       d("join_versions", "Versions of the table held by the join."),
		keys:           d("join_keys", "Keys of the table with at least one version held."),
		tableWM:        d("table_watermark_seconds", "The versioned table's watermark, Unix seconds."),
	}
}

func (j *joinMetrics) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{j.tableRows, j.tableLate, j.tableMalformed, j.joined, j.unmatched, j.lateAtJoin, j.buffered, j.versions, j.keys, j.tableWM} {
		ch <- d
	}
}

func (j *joinMetrics) collect(s *ubik.Stats, c, g func(*prometheus.Desc, float64)) {
	if s.Table.RowsIn == 0 && s.Join.Events == 0 {
		return
	}
	c(j.tableRows, float64(s.Table.RowsIn))
	c(j.tableLate, float64(s.Table.Late))
	c(j.tableMalformed, float64(s.Table.Malformed))
	c(j.joined, float64(s.Join.Joined))
	c(j.unmatched, float64(s.Join.Unmatched))
	c(j.lateAtJoin, float64(s.Join.LateEvents))
	g(j.buffered, float64(s.Join.Buffered))
	g(j.versions, float64(s.Join.Versions))
	g(j.keys, float64(s.Join.Keys))
	if wm := s.Join.TableWM; wm != minInt64 && wm < 1<<62 {
		g(j.tableWM, float64(wm)/1e6)
	}
}

// A query with an interval join of two streams reads two files too: the
// left stream (--input or its source's path) and the right stream (its
// source's WITH (path = 'FILE')). The two are read together, each record
// taken from the input whose watermark is behind, so the rows each side
// holds stay those of the join's bound (the result does not depend on how
// the inputs interleave). When the right file ends, its input ends; when
// the left file ends, its input ends (Query.EndInput) and the rest of the
// right file is read: the join then holds no right row, where without the
// end it would hold every one of them until the run's end. With
// --state-dir both files' positions are in the checkpoint.

// rightInput reads the right stream's file of an interval join.
type rightInput struct {
	src        *ubik.Source
	name, path string
	fh         *os.File
	br         *bufio.Reader
	csv        bool
	offset     int64 // bytes consumed
	line       int64
	done       bool
}

func openRightInput(r, left *ubik.Source, offset, line int64) (*rightInput, error) {
	if strings.EqualFold(r.Option("connector"), "kafka") {
		return nil, fmt.Errorf("%w: source %s is a Kafka topic: a join of two inputs runs from files (or the Go API); give %s a file (WITH (path = 'FILE'))", ErrUsage, r.Name(), r.Name())
	}
	path := r.Option("path")
	if path == "" {
		return nil, fmt.Errorf("%w: source %s has no path option: a file run of a join of two inputs reads the second, %s, from WITH (path = 'FILE') (the first, %s, from --input or its path)", ErrUsage, r.Name(), r.Name(), left.Name())
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", r.Name(), err)
	}
	if offset > 0 {
		if _, err := fh.Seek(offset, io.SeekStart); err != nil {
			fh.Close()
			return nil, fmt.Errorf("resume: %w", err)
		}
	}
	return &rightInput{src: r, name: r.Name(), path: path, fh: fh, br: bufio.NewReaderSize(fh, 1<<20),
		csv: strings.EqualFold(r.Option("format"), "csv"), offset: offset, line: line}, nil
}

// csvHeader pushes the CSV header of a file resumed past it.
func (ri *rightInput) csvHeader(q *ubik.Query, resumed bool, header string) error {
	if !ri.csv || !resumed || ri.offset == 0 || strings.EqualFold(header, "false") {
		return nil
	}
	hf, err := os.Open(ri.path)
	if err != nil {
		return err
	}
	hdr, _, _, _ := readRecord(bufio.NewReader(hf), true)
	hf.Close()
	if err := q.PushInput(ri.name, bytes.TrimPrefix(trimCR(hdr), utf8BOM)); err != nil {
		return fmt.Errorf("resume: %s: CSV header: %w", ri.name, err)
	}
	return nil
}

// behind reports whether the right input should be read before the
// next left record: its watermark is not ahead of the left's.
func (ri *rightInput) behind(q *ubik.Query) bool {
	if ri.done {
		return false
	}
	l, r := q.InputWatermarks()
	return r <= l
}

// pushOne pushes the right file's next record (ending the input at the
// end of the file). curLine is the late output's line number; onBad
// receives a malformed row (its error, a crossed --max-bad, is returned).
func (ri *rightInput) pushOne(q *ubik.Query, onBad func(path string, lineNo int64, row []byte, err error) error, curLine *int64) error {
	for {
		line, n, size, rerr := readRecord(ri.br, ri.csv)
		if len(line) == 0 && rerr != nil && !errors.Is(rerr, errTooLong) {
			if rerr != io.EOF {
				return fmt.Errorf("source %s: %w", ri.name, rerr)
			}
			ri.done = true
			*curLine = 0
			return q.EndInput(ri.name)
		}
		atStart := ri.offset == 0
		ri.line += n
		ri.offset += size
		if errors.Is(rerr, errTooLong) {
			// Malformed, as on the first input: the run goes on.
			return onBad(ri.path, ri.line, nil, tooLongError(n, size))
		}
		line = trimCR(line)
		if atStart {
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		if blankLine(line) {
			continue
		}
		*curLine = ri.line
		err := q.PushInput(ri.name, line)
		*curLine = 0
		if err == nil {
			return nil
		}
		var ee *ubik.EventError
		if !errors.As(err, &ee) {
			if errors.Is(err, ubik.ErrCSVHeader) {
				return fmt.Errorf("%s:%d: %w", ri.path, ri.line, err)
			}
			return err
		}
		return onBad(ri.path, ri.line, line, ee.Err)
	}
}

// intervalSummary is the run summary's part for an interval join: the
// rows that reached each side of the join (a stream's decoded events, or
// a view's final rows for a join of two views), what it joined, turned
// away late and held. What each input read is the summary's Inputs.
type intervalSummary struct {
	LeftRows  int64 `json:"left_rows"`
	RightRows int64 `json:"right_rows"`
	LateLeft  int64 `json:"left_late_at_join"`
	LateRight int64 `json:"right_late_at_join"`
	NullKeys  int64 `json:"null_keys"`
	Matches   int64 `json:"joined_rows"`
	LeftPeak  int64 `json:"left_held_peak"`
	RightPeak int64 `json:"right_held_peak"`
	Dropped   int64 `json:"rows_dropped"`
}

func newIntervalSummary(st ubik.Stats) *intervalSummary {
	j := st.Interval
	return &intervalSummary{LeftRows: j.LeftRows, RightRows: j.RightRows, LateLeft: j.LateLeft, LateRight: j.LateRight,
		NullKeys: j.NullKeys, Matches: j.Matches, LeftPeak: j.LeftPeak, RightPeak: j.RightPeak, Dropped: j.Dropped}
}

func (j *intervalSummary) text() string {
	return fmt.Sprintf("; interval join: %d left and %d right rows, %d joined rows; late at the join: %d left, %d right; held at most %d left, %d right rows",
		j.LeftRows, j.RightRows, j.Matches, j.LateLeft, j.LateRight, j.LeftPeak, j.RightPeak)
}

// intervalMetrics are an interval join's metrics (exported only for a
// query with one).
type intervalMetrics struct {
	rows, late, matches, nullKeys, dropped *prometheus.Desc
	held, wm                               *prometheus.Desc
}

func newIntervalMetrics(d func(n, help string) *prometheus.Desc, side func(n, help string) *prometheus.Desc) intervalMetrics {
	return intervalMetrics{
		rows:     side("interval_join_rows_total", "Rows pushed to an input of the interval join, by input (left, right)."),
		late:     side("interval_join_rows_late_total", "Rows behind their input's watermark less the allowed lateness (not joined), by input."),
		matches:  d("interval_join_matches_total", "Joined rows the interval join produced."),
		nullKeys: d("interval_join_null_keys_total", "Rows whose join key has a NULL (they never match)."),
		dropped:  d("interval_join_rows_dropped_total", "Rows dropped once the other input's watermark made a match impossible."),
		held:     side("interval_join_rows_held", "Rows the interval join holds now, by input."),
		wm:       side("interval_join_watermark_seconds", "An interval join input's watermark, Unix seconds, by input."),
	}
}

func (j *intervalMetrics) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{j.rows, j.late, j.matches, j.nullKeys, j.dropped, j.held, j.wm} {
		ch <- d
	}
}

func (j *intervalMetrics) collect(s *ubik.Stats, c, g func(*prometheus.Desc, float64, ...string)) {
	st := s.Interval
	if st.LeftRows == 0 && st.RightRows == 0 {
		return
	}
	c(j.rows, float64(st.LeftRows), "left")
	c(j.rows, float64(st.RightRows), "right")
	c(j.late, float64(st.LateLeft), "left")
	c(j.late, float64(st.LateRight), "right")
	c(j.matches, float64(st.Matches))
	c(j.nullKeys, float64(st.NullKeys))
	c(j.dropped, float64(st.Dropped))
	g(j.held, float64(st.LeftHeld), "left")
	g(j.held, float64(st.RightHeld), "right")
	for i, wm := range []int64{st.LeftWM, st.RightWM} {
		if wm != minInt64 && wm < 1<<62 {
			g(j.wm, float64(wm)/1e6, []string{"left", "right"}[i])
		}
	}
}
