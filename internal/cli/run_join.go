package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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
