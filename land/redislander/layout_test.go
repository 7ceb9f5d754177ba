package redislander

import (
	"context"
	"reflect"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
)

// TestKeyLayoutAsDocumented pins the layout land/README.md documents for a
// host that reads Redis: the key is PREFIX + query + ":" + the group's JSON
// array (+ ":" + the window start in microseconds since the epoch, in
// history mode), and the hash holds value, key, window_start and
// window_end (µs, decimal), revision (decimal) and final ("1" or "0").
func TestKeyLayoutAsDocumented(t *testing.T) {
	c := client(t, testenv.RequireRedis(t))
	ctx := context.Background()
	rec := changelog.Record{
		Key:   []byte(`["acme", "2026-07-18 10:00:00"]`),
		Value: []byte(`{"merchant": "acme", "window_start": "2026-07-18 10:00:00", "orders": 12}`),
		Meta: changelog.Meta{Query: "merchant_totals", Final: true, Revision: 3, Windowed: true,
			WindowStart: 1784368800000000, WindowEnd: 1784368860000000, WindowPositions: []int{1}},
	}
	for mode, key := range map[land.Mode]string{
		land.Latest:  `doc/merchant_totals:["acme"]`,
		land.History: `doc/merchant_totals:["acme"]:1784368800000000`,
	} {
		l, err := New(ctx, Options{Client: c, Mode: mode, Prefix: "doc/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cleanup(c, "doc/") })
		if _, err := l.Land(ctx, []changelog.Record{rec}); err != nil {
			t.Fatal(err)
		}
		got, err := c.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"value": string(rec.Value), "key": string(rec.Key), "window_start": "1784368800000000",
			"window_end": "1784368860000000", "revision": "3", "final": "1"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: HGETALL %s = %v, want %v", mode, key, got, want)
		}
		cleanup(c, "doc/")
	}
}

// TestKeysAsKey checks that a pipeline's keys, cut from one string, are
// each what Key returns, in every mode, for groups and window starts of
// every size and sign (a pipeline's length estimate must not matter).
func TestKeysAsKey(t *testing.T) {
	for _, mode := range []land.Mode{land.Continuous, land.Latest, land.History} {
		l := &Lander{o: Options{Mode: mode, Prefix: "p/"}}
		var chunk []land.Item
		for i, ws := range []int64{0, -1, 1784368800000000, -9223372036854775808, 9223372036854775807, 7} {
			chunk = append(chunk, land.Item{Ref: land.Ref{Query: "q" + string(rune('a'+i)), Group: []byte(`["g` + string(make([]byte, i*7)) + `"]`), WindowStart: ws}})
		}
		keys := l.keys(chunk)
		if len(keys) != len(chunk) {
			t.Fatalf("%v: %d keys for %d items", mode, len(keys), len(chunk))
		}
		for i, it := range chunk {
			if want := l.Key(it.Ref); keys[i] != want {
				t.Errorf("%v: key %d is %q, Key says %q", mode, i, keys[i], want)
			}
		}
	}
}
