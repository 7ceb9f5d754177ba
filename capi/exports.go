package main

/*
#define UBIK_NO_PROTOTYPES
#include "ubik.h"

int ubik__keep(char *p);
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// Every exported function recovers: a panic becomes UBIK_ERR_INTERNAL with
// the stack in the message, never a crash of the host.
func recoverExport(rc *C.int) {
	if r := recover(); r != nil {
		*rc = fail(C.UBIK_ERR_INTERNAL, fmt.Errorf("%w: %v\n%s", ubik.ErrInternal, r, debug.Stack()))
	}
}

// ---- library --------------------------------------------------------------

// codeText holds C copies of the table's names and descriptions, made once
// and kept for the life of the process (ubik.h promises static strings).
var codeText = sync.OnceValue(func() map[C.int][2]*C.char {
	m := make(map[C.int][2]*C.char, len(codes)+1)
	keep := func(s string) *C.char {
		p := C.CString(s)
		if C.ubik__keep(p) == 0 {
			panic("capi: too many kept strings")
		}
		return p
	}
	for _, c := range codes {
		m[c.num] = [2]*C.char{keep(c.name), keep(c.description)}
	}
	m[math.MinInt32] = [2]*C.char{keep(unknownCode.name), keep(unknownCode.description)}
	return m
})

func codeStrings(n C.int) [2]*C.char {
	m := codeText()
	if s, ok := m[n]; ok {
		return s
	}
	return m[math.MinInt32]
}

//export ubik_error_name
func ubik_error_name(code C.int) (s *C.char) {
	defer func() {
		if recover() != nil {
			s = nil
		}
	}()
	return codeStrings(code)[0]
}

//export ubik_error_description
func ubik_error_description(code C.int) (s *C.char) {
	defer func() {
		if recover() != nil {
			s = nil
		}
	}()
	return codeStrings(code)[1]
}

//export ubik_error_retryable
func ubik_error_retryable(code C.int) (r C.int) {
	defer func() {
		if recover() != nil {
			r = 0
		}
	}()
	if lookupCode(code).retryable {
		return 1
	}
	return 0
}

// ---- engine ---------------------------------------------------------------

type engineOptions struct {
	MaxPendingRecords *int `json:"max_pending_records"`
}

type queryOptions struct {
	Name       string `json:"name"`
	Strict     bool   `json:"strict"`
	JoinBuffer int    `json:"join_buffer"`
}

// decodeOptions parses an options object strictly: unknown fields, a
// non-object and trailing data are errors. NULL and "" mean the defaults.
func decodeOptions(text *C.char, v any) error {
	if text == nil {
		return nil
	}
	b := []byte(C.GoString(text))
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errInvalidOptions, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after the options object", errInvalidOptions)
	}
	return nil
}

//export ubik_engine_open
func ubik_engine_open(optionsJSON *C.char, out *C.ubik_engine) (rc C.int) {
	defer recoverExport(&rc)
	if out == nil {
		return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: ubik_engine_open: out is NULL", errInvalidArgument))
	}
	var eo engineOptions
	if err := decodeOptions(optionsJSON, &eo); err != nil {
		return fail(C.UBIK_ERR_INVALID_OPTIONS, err)
	}
	opts := ubik.DefaultOptions()
	if eo.MaxPendingRecords != nil {
		if *eo.MaxPendingRecords < 1 {
			return fail(C.UBIK_ERR_INVALID_OPTIONS, fmt.Errorf("%w: max_pending_records must be at least 1, got %d", errInvalidOptions, *eo.MaxPendingRecords))
		}
		opts.MaxPendingRecords = *eo.MaxPendingRecords
	}
	eng, err := ubik.Open(opts)
	if err != nil {
		return fail(codeOf(err, false), err)
	}
	*out = C.ubik_engine(handles.addEngine(&engineObj{eng: eng}))
	return C.UBIK_OK
}

//export ubik_engine_register_source
func ubik_engine_register_source(h C.ubik_engine, sql *C.char) (rc C.int) {
	defer recoverExport(&rc)
	e, err := handles.engine(uint64(h))
	if err != nil {
		return fail(C.UBIK_ERR_INVALID_HANDLE, err)
	}
	if sql == nil {
		return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: ubik_engine_register_source: sql is NULL", errInvalidArgument))
	}
	if err := e.eng.Exec(C.GoString(sql)); err != nil {
		return fail(codeOf(err, true), sqlMessage(err))
	}
	return C.UBIK_OK
}

//export ubik_engine_close
func ubik_engine_close(h C.ubik_engine) (rc C.int) {
	defer recoverExport(&rc)
	e, err := handles.removeEngine(uint64(h))
	if err != nil {
		return fail(C.UBIK_ERR_INVALID_HANDLE, err)
	}
	if err := e.eng.Close(); err != nil {
		return fail(codeOf(err, false), err)
	}
	return C.UBIK_OK
}

// sqlMessage appends the binder's caret line (the query line with a ^ under
// the bad span), when the error carries one, as the CLI prints it.
func sqlMessage(err error) error {
	var c interface{ Caret() string }
	if errors.As(err, &c) {
		if caret := c.Caret(); caret != "" {
			return fmt.Errorf("%w\n%s", err, caret)
		}
	}
	return err
}

// ---- query ----------------------------------------------------------------

//export ubik_query_start
func ubik_query_start(h C.ubik_engine, sql *C.char, optionsJSON *C.char, out *C.ubik_query) (rc C.int) {
	defer recoverExport(&rc)
	e, err := handles.engine(uint64(h))
	if err != nil {
		return fail(C.UBIK_ERR_INVALID_HANDLE, err)
	}
	if sql == nil || out == nil {
		return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: ubik_query_start: sql and out must not be NULL", errInvalidArgument))
	}
	var qo queryOptions
	if err := decodeOptions(optionsJSON, &qo); err != nil {
		return fail(C.UBIK_ERR_INVALID_OPTIONS, err)
	}
	if qo.JoinBuffer < 0 {
		return fail(C.UBIK_ERR_INVALID_OPTIONS, fmt.Errorf("%w: join_buffer must be 0 (the default) or more, not %d", errInvalidOptions, qo.JoinBuffer))
	}
	q, err := e.eng.Start(C.GoString(sql), ubik.QueryOptions{Name: qo.Name, Strict: qo.Strict, JoinBuffer: qo.JoinBuffer})
	if err != nil {
		return fail(codeOf(err, true), sqlMessage(err))
	}
	*out = C.ubik_query(handles.addQuery(&queryObj{q: q, strict: qo.Strict}))
	return C.UBIK_OK
}

// withQuery runs f with the query's lock held, after checking the handle. A
// panic in f fails the query (its state may be inconsistent) and becomes
// UBIK_ERR_INTERNAL.
func withQuery(h C.ubik_query, f func(o *queryObj) C.int) (rc C.int) {
	o, err := handles.query(uint64(h))
	if err != nil {
		return fail(C.UBIK_ERR_INVALID_HANDLE, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.freed {
		// Freed by another thread between the lookup and the lock.
		return fail(C.UBIK_ERR_INVALID_HANDLE, fmt.Errorf("%w: handle %d was released", errInvalidHandle, uint64(h)))
	}
	defer func() {
		if r := recover(); r != nil {
			o.failed = fmt.Errorf("%w: %v\n%s", ubik.ErrInternal, r, debug.Stack())
			rc = fail(C.UBIK_ERR_INTERNAL, o.failed)
		}
	}()
	return f(o)
}

// live reports the error that stops a call on a failed query.
func (o *queryObj) live() C.int {
	if o.failed != nil {
		return fail(C.UBIK_ERR_QUERY_FAILED, fmt.Errorf("%w: %v", errQueryFailed, o.failed))
	}
	return C.UBIK_OK
}

// result classifies the error of one root API call on the query, and
// records it as the query's failure when it is fatal: everything except a
// skipped event of a non-strict query, backpressure, a full join buffer
// and a closed input.
func (o *queryObj) result(err error) C.int {
	if err == nil {
		return C.UBIK_OK
	}
	c := codeOf(err, false)
	switch c {
	case C.UBIK_ERR_MALFORMED_EVENT, C.UBIK_ERR_EVAL:
		if o.strict {
			o.failed = err
		}
	case C.UBIK_ERR_BACKPRESSURE, C.UBIK_ERR_JOIN_BUFFER, C.UBIK_ERR_CLOSED:
	default:
		o.failed = err
	}
	return fail(c, err)
}

// push copies one event out of C memory (the decoder's row aliases its
// input until the next push) and applies it.
func (o *queryObj) push(event []byte) error {
	o.in = append(o.in[:0], event...)
	return o.q.Push(o.in)
}

//export ubik_push
func ubik_push(h C.ubik_query, event *C.char, n C.size_t) (rc C.int) {
	defer recoverExport(&rc)
	return withQuery(h, func(o *queryObj) C.int {
		if rc := o.live(); rc != C.UBIK_OK {
			return rc
		}
		if event == nil && n > 0 {
			return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: ubik_push: event is NULL", errInvalidArgument))
		}
		return o.result(o.push(cBytes(event, n)))
	})
}

// cBytes views n bytes of C memory as a Go slice (valid during the call).
func cBytes(p *C.char, n C.size_t) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n))
}

//export ubik_push_lines
func ubik_push_lines(h C.ubik_query, data *C.char, n C.size_t, consumed *C.size_t, rejected *C.size_t) (rc C.int) {
	defer recoverExport(&rc)
	done, skipped := 0, 0
	defer func() {
		if consumed != nil {
			*consumed = C.size_t(done)
		}
		if rejected != nil {
			*rejected = C.size_t(skipped)
		}
	}()
	return withQuery(h, func(o *queryObj) C.int {
		if rc := o.live(); rc != C.UBIK_OK {
			return rc
		}
		if data == nil && n > 0 {
			return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: ubik_push_lines: data is NULL", errInvalidArgument))
		}
		buf := cBytes(data, n)
		var first error
		firstCode := C.int(C.UBIK_OK)
		for lineNo := 1; done < len(buf); lineNo++ {
			line := buf[done:]
			next := len(buf)
			if i := bytes.IndexByte(line, '\n'); i >= 0 {
				line, next = line[:i], done+i+1
			}
			if k := len(line); k > 0 && line[k-1] == '\r' {
				line = line[:k-1]
			}
			if len(bytes.TrimSpace(line)) == 0 {
				done = next
				continue
			}
			err := o.push(line)
			if err == nil {
				done = next
				continue
			}
			c := codeOf(err, false)
			if (c == C.UBIK_ERR_MALFORMED_EVENT || c == C.UBIK_ERR_EVAL) && !o.strict {
				done = next
				skipped++
				if first == nil {
					first, firstCode = fmt.Errorf("line %d: %w", lineNo, err), c
				}
				continue
			}
			if c == C.UBIK_ERR_MALFORMED_EVENT || c == C.UBIK_ERR_EVAL {
				done = next // a strict query's bad line was consumed, and failed the query
				skipped++
			}
			return o.result(fmt.Errorf("line %d: %w", lineNo, err))
		}
		if first != nil {
			if skipped > 1 {
				first = fmt.Errorf("%d lines skipped; the first: %w", skipped, first)
			}
			return fail(firstCode, first)
		}
		return C.UBIK_OK
	})
}

//export ubik_next_keyed
func ubik_next_keyed(h C.ubik_query, key **C.uint8_t, keyLen *C.size_t, value **C.uint8_t, valueLen *C.size_t, meta *C.ubik_meta) (rc C.int) {
	defer recoverExport(&rc)
	if key == nil || keyLen == nil || value == nil || valueLen == nil {
		return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: ubik_next_keyed: key, key_len, value and value_len must not be NULL", errInvalidArgument))
	}
	return withQuery(h, func(o *queryObj) C.int {
		rec, ok := o.q.Next()
		if !ok {
			switch {
			case o.failed != nil:
				return o.live()
			case o.ended:
				return C.UBIK_END
			}
			return C.UBIK_NONE
		}
		kv, ok := o.rec.bytes(len(rec.Key) + len(rec.Value))
		if !ok {
			return o.outOfMemory()
		}
		copy(kv, rec.Key)
		copy(kv[len(rec.Key):], rec.Value)
		base := unsafe.Pointer(unsafe.SliceData(kv))
		*key = (*C.uint8_t)(base)
		*keyLen = C.size_t(len(rec.Key))
		*value = (*C.uint8_t)(unsafe.Add(base, len(rec.Key)))
		*valueLen = C.size_t(len(rec.Value))
		if meta == nil {
			return C.UBIK_OK
		}
		m := rec.Meta
		name, ok := o.name.bytes(len(m.Query) + 1)
		if !ok {
			return o.outOfMemory()
		}
		copy(name, m.Query)
		name[len(m.Query)] = 0
		meta.query = (*C.char)(unsafe.Pointer(unsafe.SliceData(name)))
		meta.query_len = C.size_t(len(m.Query))
		meta.final = boolInt32(m.Final)
		meta.windowed = boolInt32(m.Windowed)
		meta.revision = C.uint64_t(m.Revision)
		meta.window_start_us = C.int64_t(m.WindowStart)
		meta.window_end_us = C.int64_t(m.WindowEnd)
		meta.window_positions = nil
		meta.window_positions_len = 0
		meta.group_key = *key
		meta.group_key_len = *keyLen
		if len(m.WindowPositions) > 0 {
			// The group key is never longer than the key, so appending into
			// a buffer of the key's size stays in C memory.
			gb, ok := o.group.bytes(len(rec.Key))
			if !ok {
				return o.outOfMemory()
			}
			g, err := changelog.AppendGroupKey(gb[:0], rec.Key, m.WindowPositions)
			if err != nil {
				o.failed = fmt.Errorf("capi: group key of %s: %w", rec.Key, err)
				return fail(C.UBIK_ERR_INTERNAL, o.failed)
			}
			if len(g) > 0 && unsafe.SliceData(g) != unsafe.SliceData(gb) {
				o.failed = errors.New("capi: group key outgrew the key")
				return fail(C.UBIK_ERR_INTERNAL, o.failed)
			}
			meta.group_key = (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(gb)))
			meta.group_key_len = C.size_t(len(g))
			pb, ok := o.pos.bytes(4 * len(m.WindowPositions))
			if !ok {
				return o.outOfMemory()
			}
			pos := unsafe.Slice((*C.int32_t)(unsafe.Pointer(unsafe.SliceData(pb))), len(m.WindowPositions))
			for i, p := range m.WindowPositions {
				pos[i] = C.int32_t(p)
			}
			meta.window_positions = &pos[0]
			meta.window_positions_len = C.size_t(len(pos))
		}
		return C.UBIK_OK
	})
}

// outOfMemory fails the query: the record taken from the buffer could not
// be returned, so the host would silently miss it if the query went on.
func (o *queryObj) outOfMemory() C.int {
	o.failed = errors.New("capi: out of C memory while returning a record")
	return fail(C.UBIK_ERR_INTERNAL, o.failed)
}

func boolInt32(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

//export ubik_push_input
func ubik_push_input(h C.ubik_query, input *C.char, record *C.char, n C.size_t) (rc C.int) {
	defer recoverExport(&rc)
	return withQuery(h, func(o *queryObj) C.int {
		if rc := o.live(); rc != C.UBIK_OK {
			return rc
		}
		if input == nil || (record == nil && n > 0) {
			return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: ubik_push_input: input and record must not be NULL", errInvalidArgument))
		}
		// Each input's decoder may alias its last record until its next
		// push, so the table's rows are copied into a buffer of their own.
		name := C.GoString(input)
		buf := &o.in
		if second := secondInput(o.q); second != "" && strings.EqualFold(name, second) {
			buf = &o.tin
		}
		*buf = append((*buf)[:0], cBytes(record, n)...)
		err := o.q.PushInput(name, *buf)
		if errors.Is(err, ubik.ErrUnknownInput) {
			return fail(C.UBIK_ERR_INVALID_ARGUMENT, err) // not the query's failure
		}
		return o.result(err)
	})
}

// secondInput is the name of a join's second input: a temporal join's
// versioned table or an interval join's right stream, the query's or, for
// a query over views, its graph's ("" without one).
func secondInput(q *ubik.Query) string {
	if in := q.Inputs(); len(in) == 2 {
		return in[1]
	}
	return ""
}

// needJoin refuses a call on a join's second input for a query without a
// join, without failing the query.
func (o *queryObj) needJoin(what string) C.int {
	if secondInput(o.q) == "" {
		return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: %s: the query has no join, so no second input (a versioned table or an interval join's right stream)", errInvalidArgument, what))
	}
	return C.UBIK_OK
}

//export ubik_advance_table_watermark
func ubik_advance_table_watermark(h C.ubik_query, micros C.int64_t) (rc C.int) {
	defer recoverExport(&rc)
	return withQuery(h, func(o *queryObj) C.int {
		if rc := o.live(); rc != C.UBIK_OK {
			return rc
		}
		if rc := o.needJoin("ubik_advance_table_watermark"); rc != C.UBIK_OK {
			return rc
		}
		return o.result(o.q.AdvanceTableWatermark(time.UnixMicro(int64(micros))))
	})
}

//export ubik_end_table
func ubik_end_table(h C.ubik_query) (rc C.int) {
	defer recoverExport(&rc)
	return withQuery(h, func(o *queryObj) C.int {
		if rc := o.live(); rc != C.UBIK_OK {
			return rc
		}
		if rc := o.needJoin("ubik_end_table"); rc != C.UBIK_OK {
			return rc
		}
		return o.result(o.q.EndTable())
	})
}

//export ubik_advance_watermark
func ubik_advance_watermark(h C.ubik_query, micros C.int64_t) (rc C.int) {
	defer recoverExport(&rc)
	return withQuery(h, func(o *queryObj) C.int {
		if rc := o.live(); rc != C.UBIK_OK {
			return rc
		}
		return o.result(o.q.AdvanceWatermark(time.UnixMicro(int64(micros))))
	})
}

//export ubik_flush
func ubik_flush(h C.ubik_query) (rc C.int) {
	defer recoverExport(&rc)
	return withQuery(h, func(o *queryObj) C.int {
		if rc := o.live(); rc != C.UBIK_OK {
			return rc
		}
		return o.result(o.q.EmitEarly())
	})
}

//export ubik_tick
func ubik_tick(h C.ubik_query) (rc C.int) {
	defer recoverExport(&rc)
	return withQuery(h, func(o *queryObj) C.int {
		if rc := o.live(); rc != C.UBIK_OK {
			return rc
		}
		return o.result(o.q.Tick())
	})
}

//export ubik_query_close
func ubik_query_close(h C.ubik_query) (rc C.int) {
	defer recoverExport(&rc)
	return withQuery(h, func(o *queryObj) C.int {
		if rc := o.live(); rc != C.UBIK_OK {
			return rc
		}
		if rc := o.result(o.q.Close()); rc != C.UBIK_OK {
			return rc
		}
		o.ended = true
		return C.UBIK_OK
	})
}

// statsJSON is the shape of ubik_query_stats (documented in ubik.h).
type statsJSON struct {
	EventsIn         int64              `json:"events_in"`
	Malformed        int64              `json:"malformed"`
	Pending          int                `json:"pending"`
	Rows             int64              `json:"rows"`
	Filtered         int64              `json:"filtered"`
	EvalErrors       int64              `json:"eval_errors"`
	Late             int64              `json:"late"`
	RecordsOut       int64              `json:"records_out"`
	HavingSuppressed int64              `json:"having_suppressed"`
	Unchanged        int64              `json:"unchanged_suppressed"`
	Duplicates       int64              `json:"duplicates"`
	DedupLate        int64              `json:"dedup_late"`
	WindowsFinalized int64              `json:"windows_finalized"`
	LiveGroups       int64              `json:"live_groups"`
	StateBytes       int64              `json:"state_bytes"`
	WatermarkUs      *int64             `json:"watermark_us"`
	Table            *tableStatsJSON    `json:"table,omitempty"`
	Join             *joinStatsJSON     `json:"join,omitempty"`
	Interval         *intervalStatsJSON `json:"interval,omitempty"`
}

// intervalStatsJSON is an interval join's part of ubik_query_stats.
type intervalStatsJSON struct {
	LeftRows  int64  `json:"left_rows"`
	RightRows int64  `json:"right_rows"`
	LateLeft  int64  `json:"late_left"`
	LateRight int64  `json:"late_right"`
	NullKeys  int64  `json:"null_keys"`
	Matches   int64  `json:"matches"`
	LeftHeld  int64  `json:"left_held"`
	RightHeld int64  `json:"right_held"`
	LeftPeak  int64  `json:"left_peak"`
	RightPeak int64  `json:"right_peak"`
	Dropped   int64  `json:"dropped"`
	LeftWMUs  *int64 `json:"left_watermark_us"`
	RightWMUs *int64 `json:"right_watermark_us"`
}

// tableStatsJSON and joinStatsJSON are a temporal join's part of
// ubik_query_stats.
type tableStatsJSON struct {
	RowsIn    int64 `json:"rows_in"`
	Malformed int64 `json:"malformed"`
	Late      int64 `json:"late"`
}

type joinStatsJSON struct {
	Events        int64  `json:"events"`
	LateEvents    int64  `json:"late_events"`
	Joined        int64  `json:"joined"`
	Unmatched     int64  `json:"unmatched"`
	NullKeys      int64  `json:"null_keys"`
	TableRows     int64  `json:"table_rows"`
	LateTableRows int64  `json:"late_table_rows"`
	BadTableRows  int64  `json:"bad_table_rows"`
	Buffered      int64  `json:"buffered"`
	BufferedPeak  int64  `json:"buffered_peak"`
	Versions      int64  `json:"versions"`
	VersionsPeak  int64  `json:"versions_peak"`
	Keys          int64  `json:"keys"`
	Dropped       int64  `json:"dropped"`
	TableWMUs     *int64 `json:"table_watermark_us"`
}

//export ubik_query_stats
func ubik_query_stats(h C.ubik_query, out **C.char, n *C.size_t) (rc C.int) {
	defer recoverExport(&rc)
	if out == nil {
		return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: ubik_query_stats: json is NULL", errInvalidArgument))
	}
	return withQuery(h, func(o *queryObj) C.int {
		st := o.q.Stats()
		s := statsJSON{
			EventsIn: st.EventsIn, Malformed: st.Malformed, Pending: st.Pending,
			Rows: st.Rows, Filtered: st.Filtered, EvalErrors: st.EvalErrors, Late: st.Late,
			RecordsOut: st.RecordsOut, HavingSuppressed: st.HavingSuppressed, Unchanged: st.UnchangedSuppressed,
			Duplicates: st.Duplicates, DedupLate: st.DedupLate,
			WindowsFinalized: st.WindowsFinalized, LiveGroups: st.LiveGroups, StateBytes: st.StateBytes,
		}
		// exec leaves Stats.Watermark at 0, not MinInt64, until the first
		// advance; no event time seen and 0 means none yet.
		if st.Watermark != math.MinInt64 && (st.Watermark != 0 || st.MaxEventTime != math.MinInt64) {
			s.WatermarkUs = &st.Watermark
		}
		if o.q.JoinKind() == ubik.TemporalJoin {
			s.Table = &tableStatsJSON{RowsIn: st.Table.RowsIn, Malformed: st.Table.Malformed, Late: st.Table.Late}
			j := st.Join
			s.Join = &joinStatsJSON{Events: j.Events, LateEvents: j.LateEvents, Joined: j.Joined, Unmatched: j.Unmatched,
				NullKeys: j.NullKeys, TableRows: j.TableRows, LateTableRows: j.LateTableRows, BadTableRows: j.BadTableRows,
				Buffered: j.Buffered, BufferedPeak: j.BufferedPeak, Versions: j.Versions, VersionsPeak: j.VersionsPeak,
				Keys: j.Keys, Dropped: j.Dropped}
			if j.TableWM != math.MinInt64 {
				s.Join.TableWMUs = &j.TableWM
			}
		}
		if o.q.JoinKind() == ubik.IntervalJoin {
			iv := st.Interval
			s.Interval = &intervalStatsJSON{LeftRows: iv.LeftRows, RightRows: iv.RightRows, LateLeft: iv.LateLeft,
				LateRight: iv.LateRight, NullKeys: iv.NullKeys, Matches: iv.Matches, LeftHeld: iv.LeftHeld,
				RightHeld: iv.RightHeld, LeftPeak: iv.LeftPeak, RightPeak: iv.RightPeak, Dropped: iv.Dropped}
			if iv.LeftWM != math.MinInt64 {
				s.Interval.LeftWMUs = &iv.LeftWM
			}
			if iv.RightWM != math.MinInt64 {
				s.Interval.RightWMUs = &iv.RightWM
			}
		}
		js, err := json.Marshal(s)
		if err != nil {
			return fail(C.UBIK_ERR_INTERNAL, err)
		}
		b, ok := o.stats.bytes(len(js) + 1)
		if !ok {
			return fail(C.UBIK_ERR_INTERNAL, errors.New("capi: out of C memory while returning stats"))
		}
		copy(b, js)
		b[len(js)] = 0
		*out = (*C.char)(unsafe.Pointer(unsafe.SliceData(b)))
		if n != nil {
			*n = C.size_t(len(js))
		}
		return C.UBIK_OK
	})
}

type columnJSON struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

//export ubik_query_columns
func ubik_query_columns(h C.ubik_query, out **C.char, n *C.size_t) (rc C.int) {
	defer recoverExport(&rc)
	if out == nil {
		return fail(C.UBIK_ERR_INVALID_ARGUMENT, fmt.Errorf("%w: ubik_query_columns: json is NULL", errInvalidArgument))
	}
	return withQuery(h, func(o *queryObj) C.int {
		if o.colsLen == 0 { // the columns never change: built once
			qc := o.q.Columns()
			cols := make([]columnJSON, len(qc))
			for i, c := range qc {
				cols[i] = columnJSON{Name: c.Name, Type: c.Type}
			}
			js, err := json.Marshal(cols)
			if err != nil {
				return fail(C.UBIK_ERR_INTERNAL, err)
			}
			b, ok := o.cols.bytes(len(js) + 1)
			if !ok {
				return fail(C.UBIK_ERR_INTERNAL, errors.New("capi: out of C memory while returning the columns"))
			}
			copy(b, js)
			b[len(js)] = 0
			o.colsLen = len(js)
		}
		*out = (*C.char)(o.cols.p)
		if n != nil {
			*n = C.size_t(o.colsLen)
		}
		return C.UBIK_OK
	})
}

//export ubik_query_free
func ubik_query_free(h C.ubik_query) (rc C.int) {
	defer recoverExport(&rc)
	o, err := handles.removeQuery(uint64(h))
	if err != nil {
		return fail(C.UBIK_ERR_INVALID_HANDLE, err)
	}
	// Wait for a call in progress on another thread, then release.
	o.mu.Lock()
	defer o.mu.Unlock()
	o.freed = true
	o.rec.free()
	o.pos.free()
	o.group.free()
	o.name.free()
	o.stats.free()
	o.cols.free()
	o.q, o.in = nil, nil
	return C.UBIK_OK
}

func main() {}
