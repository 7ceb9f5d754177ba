package ubik_test

import (
	"fmt"

	"github.com/ubiksql/ubik"
)

// A windowed count per key: push events, close the input, and take the
// changelog's records (key bytes, value bytes, whether final).
func Example() {
	e, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		panic(err)
	}
	q, err := e.Start(`CREATE SOURCE clicks (page VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
SELECT page, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS minute, count(*) AS n
FROM clicks GROUP BY page, TUMBLE(ts, INTERVAL '1' MINUTE)`, ubik.QueryOptions{})
	if err != nil {
		panic(err)
	}
	for _, ev := range []string{
		`{"page":"/home","ts":"2026-07-18 10:00:05"}`,
		`{"page":"/home","ts":"2026-07-18 10:00:40"}`,
		`{"page":"/cart","ts":"2026-07-18 10:01:10"}`,
	} {
		if err := q.Push([]byte(ev)); err != nil {
			panic(err)
		}
	}
	if err := q.Close(); err != nil {
		panic(err)
	}
	for {
		r, ok := q.Next()
		if !ok {
			break
		}
		fmt.Printf("%s %s final=%v\n", r.Key, r.Value, r.Meta.Final)
	}
	// Output:
	// ["/home", "2026-07-18 10:00:00"] {"page": "/home", "minute": "2026-07-18 10:00:00", "n": 2} final=true
	// ["/cart", "2026-07-18 10:01:00"] {"page": "/cart", "minute": "2026-07-18 10:01:00", "n": 1} final=true
}

// The columns of a query's output row and the join it reads.
func ExampleQuery_Columns() {
	e, _ := ubik.Open(ubik.DefaultOptions())
	q, err := e.Start(`CREATE SOURCE orders (customer VARCHAR, amount DECIMAL(10,2), ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
SELECT customer, sum(amount) AS total FROM orders GROUP BY customer`, ubik.QueryOptions{})
	if err != nil {
		panic(err)
	}
	defer q.Close()
	for _, c := range q.Columns() {
		fmt.Println(c.Name, c.Type)
	}
	fmt.Println(q.JoinKind() == ubik.NoJoin)
	// Output:
	// customer VARCHAR
	// total DECIMAL(38,2)
	// true
}
