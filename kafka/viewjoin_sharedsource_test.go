package kafka

import (
	"fmt"
	"strings"
	"testing"
)

// sharedSourceShapes are joins of two views whose sides both read the
// person stream without sharing a view: the left an interval join of
// both streams and the right a view of persons (_IJSIDE), and the same
// with the sides swapped.
var sharedSourceShapes = []viewJoinShape{viewJoinShapes["_IJSIDE"], {"the right side joining two streams", `
CREATE VIEW pa AS SELECT p.id, TUMBLE_START(a.date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS auctions
FROM person p JOIN auction a ON a.seller = p.id AND a.date_time BETWEEN p.date_time AND p.date_time + INTERVAL '10' SECOND
GROUP BY p.id, TUMBLE(a.date_time, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8r AS SELECT y.id, TUMBLE_START(y.window_start, INTERVAL '10' SECOND) AS window_start, max(x.auctions) AS auctions, max(y.versions) AS versions
FROM new_persons y JOIN pa x ON x.id = y.id AND x.window_start = y.window_start
GROUP BY y.id, TUMBLE(y.window_start, INTERVAL '10' SECOND) EMIT FINAL;`,
	map[string]string{"q8r": "q8r-out", "pa": "pa-out", "new_persons": "np-out"}}}

// TestRunKafkaViewJoinSharedSource: both sides of a join of two views
// read the person stream; a late and a malformed event of each stream
// follow. The Kafka run counts each stream's events and malformed once
// (the first side in plan order that reads it), the auctions as events
// too, and each view's late events, as the in-process graph (a file
// run's) does, and hands each malformed event to OnBadEvent once.
func TestRunKafkaViewJoinSharedSource(t *testing.T) {
	persons, auctions := nexmark(t, "person", 6000, 10), nexmark(t, "auction", 18000, 10)
	tail := [2][][]byte{
		{[]byte(`{"id":1000,"name":"Late Person","email":"e","city":"c","state":"s","date_time":"2026-07-18 09:00:00.000"}`),
			[]byte(`{"id":1001,"name":`)},
		{[]byte(`{"id":1,"item_name":"i","seller":1000,"category":1,"initial_bid":1,"reserve":1,"date_time":"2026-07-18 09:00:00.000","expires":"2026-07-18 09:10:00.000"}`),
			[]byte(`{"id":2,"seller":`)},
	}
	for _, s := range sharedSourceShapes {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel() // each on a cluster of its own
			// The late person, reported by each view that reads it (the
			// in-process graph hands a late right row of an interval join
			// to Config.LateTable, under the query's name).
			sameReported(t, s, persons, auctions, tail, func(want reported) string {
				if n := int64(len(persons) + len(auctions) + 4); want.events != n || want.malformed != 2 || want.lateN < 2 || len(latePersons(want.late)) != 2 {
					return fmt.Sprintf("want %d events, 2 malformed, the person late in both views", n)
				}
				return ""
			}, latePersons)
		})
	}
}

// latePersons are the late events of late that are the tail's person.
func latePersons(late []string) []string {
	var out []string
	for _, l := range late {
		if strings.Contains(l, "Late Person") {
			out = append(out, l)
		}
	}
	return out
}
