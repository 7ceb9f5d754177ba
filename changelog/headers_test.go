package changelog

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestHeadersRoundTrip(t *testing.T) {
	for _, m := range []Meta{
		{Query: "totals", Revision: 1},
		{Query: "q", Final: true, Revision: 1<<64 - 1, Windowed: true, WindowStart: -5, WindowEnd: 1 << 62, WindowPositions: []int{1}},
		{Query: "hop", Revision: 7, Windowed: true, WindowStart: 1784368800000000, WindowEnd: 1784372400000000, WindowPositions: []int{0, 2}},
	} {
		r := Record{Key: []byte(`["a", "2026-07-18 10:00:00"]`), Value: []byte(`{"n":1}`), Meta: m}
		got, err := DecodeHeaders(r.Key, r.Value, AppendHeaders[Header](nil, m))
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got  %+v\n want %+v", got, r)
		}
	}
}

func headerString(hs []Header) string {
	var b strings.Builder
	for _, x := range hs {
		b.WriteString(x.Key + "=" + string(x.Value) + ";")
	}
	return b.String()
}

func TestHeaderBytes(t *testing.T) {
	for _, c := range []struct {
		m    Meta
		want string
	}{
		{Meta{Query: "q", Revision: 3, Windowed: true, WindowStart: 10, WindowEnd: 20, WindowPositions: []int{1, 3}},
			"ubik.query=q;ubik.final=false;ubik.revision=3;ubik.window_start=10;ubik.window_end=20;ubik.window_positions=1,3;"},
		{Meta{Query: "totals", Final: true, Revision: 1},
			"ubik.query=totals;ubik.final=true;ubik.revision=1;ubik.window_positions=;"},
		// The widest numbers fit the one buffer the values share.
		{Meta{Query: "", Revision: math.MaxUint64, Windowed: true, WindowStart: math.MinInt64, WindowEnd: math.MaxInt64,
			WindowPositions: []int{math.MinInt64, -1, 0, math.MaxInt64}},
			"ubik.query=;ubik.final=false;ubik.revision=18446744073709551615;ubik.window_start=-9223372036854775808;" +
				"ubik.window_end=9223372036854775807;ubik.window_positions=-9223372036854775808,-1,0,9223372036854775807;"},
	} {
		if got := headerString(AppendHeaders[Header](nil, c.m)); got != c.want {
			t.Errorf("headers %s\nwant    %s", got, c.want)
		}
	}
	// The values share a buffer: appending to one must not write into the next.
	h := AppendHeaders[Header](nil, Meta{Query: "q", Revision: 7, Windowed: true, WindowStart: 1, WindowEnd: 2, WindowPositions: []int{3}})
	_ = append(h[0].Value, 'X')
	_ = append(h[2].Value, 'X')
	if got, want := headerString(h), "ubik.query=q;ubik.final=false;ubik.revision=7;ubik.window_start=1;ubik.window_end=2;ubik.window_positions=3;"; got != want {
		t.Errorf("after appending to values: %s\nwant %s", got, want)
	}
	// A continuous record's ubik.window_positions is present and empty, not nil.
	if h := AppendHeaders[Header](nil, Meta{Query: "q", Revision: 1}); h[len(h)-1].Value == nil {
		t.Errorf("%s is nil on a continuous record, want empty", HeaderWindowPositions)
	}
}

func goodHeaders() (key, value []byte, hs []Header) {
	return []byte(`["a", "x"]`), []byte(`{}`),
		AppendHeaders[Header](nil, Meta{Query: "q", Revision: 2, Windowed: true, WindowStart: 1, WindowEnd: 2, WindowPositions: []int{1}})
}

func TestDecodeHeadersErrors(t *testing.T) {
	set := func(k, v string) func(*[]byte, *[]byte, *[]Header) {
		return func(_, _ *[]byte, hs *[]Header) {
			for i := range *hs {
				if (*hs)[i].Key == k {
					(*hs)[i].Value = []byte(v)
				}
			}
		}
	}
	drop := func(k string) func(*[]byte, *[]byte, *[]Header) {
		return func(_, _ *[]byte, hs *[]Header) {
			var out []Header
			for _, h := range *hs {
				if h.Key != k {
					out = append(out, h)
				}
			}
			*hs = out
		}
	}
	cases := map[string]struct {
		f    func(*[]byte, *[]byte, *[]Header)
		want string
	}{
		"null value":        {func(_, v *[]byte, _ *[]Header) { *v = nil }, "null value"},
		"no key":            {func(k, _ *[]byte, _ *[]Header) { *k = nil }, "no key"},
		"no query":          {drop(HeaderQuery), "header ubik.query missing"},
		"no revision":       {drop(HeaderRevision), "header ubik.revision missing"},
		"no final":          {drop(HeaderFinal), "header ubik.final missing"},
		"no positions":      {drop(HeaderWindowPositions), "header ubik.window_positions missing"},
		"start without end": {drop(HeaderWindowEnd), "must come together"},
		"final garbled":     {set(HeaderFinal, "yes"), `ubik.final is "yes"`},
		"revision garbled":  {set(HeaderRevision, "-1"), `ubik.revision is "-1"`},
		"revision zero":     {set(HeaderRevision, "0"), `ubik.revision is "0"`},
		"start garbled":     {set(HeaderWindowStart, "10:00"), `ubik.window_start is "10:00"`},
		"positions garbled": {set(HeaderWindowPositions, "1,,2"), `ubik.window_positions is "1,,2"`},
		"positions empty":   {set(HeaderWindowPositions, ""), "ubik.window_positions is empty"},
		"twice":             {func(_, _ *[]byte, hs *[]Header) { *hs = append(*hs, (*hs)[0]) }, "ubik.query appears twice"},
		"positions unwindowed": {func(k, v *[]byte, hs *[]Header) {
			drop(HeaderWindowStart)(k, v, hs)
			drop(HeaderWindowEnd)(k, v, hs)
		}, "on an unwindowed record"},
	}
	for name, c := range cases {
		k, v, hs := goodHeaders()
		c.f(&k, &v, &hs)
		_, err := DecodeHeaders(k, v, hs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
	k, v, hs := goodHeaders()
	hs = append(hs, Header{Key: "traceparent", Value: []byte("x")})
	if _, err := DecodeHeaders(k, v, hs); err != nil {
		t.Errorf("a foreign header must be ignored: %v", err)
	}
}

// FuzzDecodeHeaders: DecodeHeaders never panics, and what it accepts
// re-encodes to headers that decode to the same record.
func FuzzDecodeHeaders(f *testing.F) {
	f.Add("q", "true", "1", "10", "20", "1", true)
	f.Add("q", "false", "18446744073709551615", "", "", "", false)
	f.Add("", "x", "01", "-1", "0", "0,1", true)
	f.Fuzz(func(t *testing.T, q, final, rev, ws, we, pos string, windowed bool) {
		key, value := []byte(`["k"]`), []byte(`{}`)
		hs := []Header{
			{Key: HeaderQuery, Value: []byte(q)}, {Key: HeaderFinal, Value: []byte(final)},
			{Key: HeaderRevision, Value: []byte(rev)}, {Key: HeaderWindowPositions, Value: []byte(pos)},
		}
		if windowed {
			hs = append(hs, Header{Key: HeaderWindowStart, Value: []byte(ws)}, Header{Key: HeaderWindowEnd, Value: []byte(we)})
		}
		got, err := DecodeHeaders(key, value, hs)
		if err != nil {
			return
		}
		again, err := DecodeHeaders(key, value, AppendHeaders[Header](nil, got.Meta))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoding %+v: %+v, %v", got, again, err)
		}
	})
}

// TestAppendHeadersAllocs bounds the allocations of a record's headers:
// one buffer for all the values (a Kafka sink calls this per record).
func TestAppendHeadersAllocs(t *testing.T) {
	m := Meta{Query: "totals", Revision: 12, Windowed: true, WindowStart: 1_700_000_000_000, WindowEnd: 1_700_000_060_000, WindowPositions: []int{1, 2}}
	dst := make([]Header, 0, 6)
	if n := testing.AllocsPerRun(100, func() { dst = AppendHeaders(dst[:0], m) }); n > 1 {
		t.Errorf("%.0f allocations for one record's headers, want 1", n)
	}
}

// AppendHeadersIn writes what AppendHeaders does, its values in the
// caller's buffer after its length, and leaves the bytes before alone.
func TestAppendHeadersIn(t *testing.T) {
	for _, m := range []Meta{
		{Query: "q", Revision: 7, Final: true},
		{Query: "totals", Revision: 1<<64 - 1, Windowed: true, WindowStart: -1 << 63, WindowEnd: 1<<63 - 1, WindowPositions: []int{1, 12}},
	} {
		buf := append(make([]byte, 0, 3+HeadersSize(m)), "abc"...)
		got := AppendHeadersIn[Header](nil, buf, m)
		if want := AppendHeaders[Header](nil, m); headerString(got) != headerString(want) {
			t.Errorf("%+v: %s, want %s", m, headerString(got), headerString(want))
		}
		room := buf[3:cap(buf)]
		for i := range room {
			room[i] = 'x'
		}
		for _, h := range got {
			if strings.Trim(string(h.Value), "x") != "" {
				t.Errorf("%+v: header %s (%q) is not in the buffer", m, h.Key, h.Value)
			}
		}
		if string(buf[:3]) != "abc" {
			t.Errorf("%+v: the bytes before the buffer's length changed: %q", m, buf[:3])
		}
	}
}
