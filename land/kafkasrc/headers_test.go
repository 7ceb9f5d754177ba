package kafkasrc

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/ubiksql/ubik/changelog"
)

func TestRoundTrip(t *testing.T) {
	for _, m := range []changelog.Meta{
		{Query: "totals", Revision: 1},
		{Query: "q", Final: true, Revision: 1<<64 - 1, Windowed: true, WindowStart: -5, WindowEnd: 1 << 62, WindowPositions: []int{1}},
		{Query: "hop", Revision: 7, Windowed: true, WindowStart: 1784368800000000, WindowEnd: 1784372400000000, WindowPositions: []int{0, 2}},
	} {
		r := changelog.Record{Key: []byte(`["a", "2026-07-18 10:00:00"]`), Value: []byte(`{"n":1}`), Meta: m}
		kr := ToKafka("t", r)
		got, err := Decode(kr)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got  %+v\n want %+v", got, r)
		}
	}
}

func TestHeaderBytes(t *testing.T) {
	h := ToKafka("t", changelog.Record{Key: []byte(`["k"]`), Value: []byte(`{}`),
		Meta: changelog.Meta{Query: "q", Revision: 3, Windowed: true, WindowStart: 10, WindowEnd: 20, WindowPositions: []int{1, 3}}}).Headers
	var b strings.Builder
	for _, x := range h {
		b.WriteString(x.Key + "=" + string(x.Value) + ";")
	}
	want := "ubik.query=q;ubik.final=false;ubik.revision=3;ubik.window_start=10;ubik.window_end=20;ubik.window_positions=1,3;"
	if b.String() != want {
		t.Fatalf("headers %s\nwant    %s", b.String(), want)
	}
}

func good() *kgo.Record {
	r := ToKafka("t", changelog.Record{Key: []byte(`["a", "x"]`), Value: []byte(`{}`),
		Meta: changelog.Meta{Query: "q", Revision: 2, Windowed: true, WindowStart: 1, WindowEnd: 2, WindowPositions: []int{1}}})
	r.Partition, r.Offset = 4, 99
	return r
}

func TestDecodeErrors(t *testing.T) {
	set := func(k, v string) func(*kgo.Record) {
		return func(r *kgo.Record) {
			for i := range r.Headers {
				if r.Headers[i].Key == k {
					r.Headers[i].Value = []byte(v)
				}
			}
		}
	}
	drop := func(k string) func(*kgo.Record) {
		return func(r *kgo.Record) {
			var hs []kgo.RecordHeader
			for _, h := range r.Headers {
				if h.Key != k {
					hs = append(hs, h)
				}
			}
			r.Headers = hs
		}
	}
	cases := map[string]func(*kgo.Record){
		"null value":        func(r *kgo.Record) { r.Value = nil },
		"no key":            func(r *kgo.Record) { r.Key = nil },
		"no query":          drop(changelog.HeaderQuery),
		"no revision":       drop(changelog.HeaderRevision),
		"no final":          drop(changelog.HeaderFinal),
		"no positions":      drop(changelog.HeaderWindowPositions),
		"start without end": drop(changelog.HeaderWindowEnd),
		"final garbled":     set(changelog.HeaderFinal, "yes"),
		"revision garbled":  set(changelog.HeaderRevision, "-1"),
		"revision zero":     set(changelog.HeaderRevision, "0"),
		"start garbled":     set(changelog.HeaderWindowStart, "10:00"),
		"positions garbled": set(changelog.HeaderWindowPositions, "1,,2"),
		"positions empty":   set(changelog.HeaderWindowPositions, ""),
		"twice":             func(r *kgo.Record) { r.Headers = append(r.Headers, r.Headers[0]) },
		"positions unwindowed": func(r *kgo.Record) {
			drop(changelog.HeaderWindowStart)(r)
			drop(changelog.HeaderWindowEnd)(r)
		},
	}
	for name, f := range cases {
		r := good()
		f(r)
		_, err := Decode(r)
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "partition 4 offset 99") {
			t.Errorf("%s: %v, want a DecodeError naming partition 4 offset 99", name, err)
		}
	}
	r := good()
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: "traceparent", Value: []byte("x")})
	if _, err := Decode(r); err != nil {
		t.Errorf("a foreign header must be ignored: %v", err)
	}
}

func TestFetchBytes(t *testing.T) {
	for maxBatch, want := range map[int]int32{1: 1 << 20, 5000: 5000 * 512, 9000: 4 << 20, 50000: 4 << 20, 1 << 20: 4 << 20} {
		if got := fetchBytes(maxBatch); got != want {
			t.Errorf("fetchBytes(%d) = %d, want %d", maxBatch, got, want)
		}
	}
}
