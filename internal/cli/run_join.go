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
	"github.com/ubiksql/ubik/internal/drive"
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
// curLine is the late output's line number; dead, when set, receives the
// malformed rows.
func loadTable(env *Env, q *ubik.Query, pq *planQuery, dead io.Writer, curLine *int64) error {
	t := pq.Join.Table
	path := t.Options["path"]
	if strings.EqualFold(t.Options["connector"], "kafka") {
		return fmt.Errorf("%w: table %s: a versioned table from a Kafka compacted topic is not supported yet; give it a file (WITH (path = 'FILE'))", ErrUsage, t.Name)
	}
	if path == "" {
		return fmt.Errorf("%w: table %s has no path option: a file run reads a versioned table from WITH (path = 'FILE')", ErrUsage, t.Name)
	}
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("table %s: %w", t.Name, err)
	}
	defer fh.Close()
	csv := strings.EqualFold(t.Options["format"], "csv")
	br := bufio.NewReaderSize(fh, 1<<20)
	var lineNo int64
	reported := 0
	for {
		line, n, rerr := readRecord(br, csv)
		if len(line) == 0 && rerr != nil {
			if rerr != io.EOF {
				return fmt.Errorf("table %s: %w", t.Name, rerr)
			}
			break
		}
		atStart := lineNo == 0
		lineNo += n
		if errors.Is(rerr, errTooLong) {
			return fmt.Errorf("%s:%d: line longer than %d bytes", path, lineNo, maxLineBytes)
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
			var he *drive.HeaderError
			if errors.As(err, &he) {
				return fmt.Errorf("%s:%d: %w", path, lineNo, err)
			}
			return err
		}
		if dead != nil {
			if werr := writeDead(dead, path, pq.Name, lineNo, line, ee.Err); werr != nil {
				return werr
			}
			continue
		}
		if reported < 10 {
			fmt.Fprintf(env.Stderr, "ubik: %s:%d: %s: %s\n", path, lineNo, badKind(ee.Err), cleanMessage(ee.Err.Error()))
		}
		reported++
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
	return fmt.Sprintf("; join: %d table rows read, %d malformed, %d late; %d events joined, %d unmatched, %d late at the join",
		j.TableRows, j.TableMalformed, j.TableLate, j.Joined, j.Unmatched, j.JoinLate)
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
