package main

import (
	"fmt"
	"sort"
	"strings"
)

// Query is one benchmark query as DuckDB runs it over a JSON lines file.
type Query struct {
	Name string
	// Input names the bench/gen workload the query reads as src: merchant,
	// bids or auction.
	Input string
	// Persons: the query also reads bench/gen's person stream (--persons) as
	// the relation person.
	Persons bool
	// SQL is the aggregation over the relation named src.
	SQL string
	// Key lists the output columns that make the changelog key, in GROUP BY
	// order (a window is keyed by its start).
	Key []string
}

// columns are read_json's explicit column types per workload, in the order of
// bench/gen's lines and of the CREATE SOURCE in bench/queries.
var columns = map[string]string{
	"merchant": "{event_id: 'VARCHAR', merchant: 'VARCHAR', customer: 'VARCHAR', amount: 'DOUBLE', event_time: 'TIMESTAMP'}",
	"bids":     "{auction: 'BIGINT', bidder: 'BIGINT', price: 'BIGINT', channel: 'VARCHAR', url: 'VARCHAR', date_time: 'TIMESTAMP'}",
	"auction":  "{id: 'BIGINT', item_name: 'VARCHAR', seller: 'BIGINT', category: 'BIGINT', initial_bid: 'BIGINT', reserve: 'BIGINT', date_time: 'TIMESTAMP', expires: 'TIMESTAMP'}",
	"person":   "{id: 'BIGINT', name: 'VARCHAR', email: 'VARCHAR', city: 'VARCHAR', state: 'VARCHAR', date_time: 'TIMESTAMP'}",
}

// queries mirror bench/queries/*.sql. The window arithmetic is DuckDB's
// time_bucket, whose buckets of 1 minute, 10 s and 2 s align with the epoch
// as Flink's (and ubik's) windows do.
var queries = map[string]Query{
	"std": {
		Name: "std", Input: "merchant", Key: []string{"merchant", "window_start"},
		SQL: `SELECT merchant, time_bucket(INTERVAL '1 minute', event_time) AS window_start,
       count(*) AS orders, sum(amount) AS total, max(amount) AS biggest
FROM src
GROUP BY merchant, window_start`,
	},
	// HOP(slide 2 s, size 10 s): a bid at t belongs to the 5 windows that
	// start at bucket(t) - 2 s * i, i = 0..4. A cross join with range(5) was
	// measured a little cheaper than unnest(generate_series(...)).
	"q5": {
		Name: "q5", Input: "bids", Key: []string{"auction", "window_start"},
		SQL: `SELECT auction, time_bucket(INTERVAL '2 seconds', date_time) - to_seconds(2 * i) AS window_start,
       count(*) AS num
FROM src, range(5) AS hops(i)
GROUP BY auction, window_start`,
	},
	"q7": {
		Name: "q7", Input: "bids", Key: []string{"window_start"},
		SQL: `SELECT time_bucket(INTERVAL '10 seconds', date_time) AS window_start, max(price) AS max_price
FROM src
GROUP BY window_start`,
	},
	// SESSION(gap 10 s) over time-sorted input: a bid opens a new session
	// when it follows the bidder's previous bid by more than the gap (two
	// bids exactly one gap apart share a session, as in Flink and Kafka
	// Streams). window_end is the last bid + gap, Flink's SESSION_END. A
	// streaming engine that sees the bids out of order must, once every
	// session has closed, end with exactly these rows.
	"q11": {
		Name: "q11", Input: "bids", Key: []string{"bidder", "window_start"},
		SQL: `WITH marked AS (
  SELECT bidder, date_time,
         CASE WHEN date_time - lag(date_time) OVER (PARTITION BY bidder ORDER BY date_time) <= INTERVAL '10 seconds'
              THEN 0 ELSE 1 END AS opens
  FROM src),
numbered AS (
  SELECT bidder, date_time,
         sum(opens) OVER (PARTITION BY bidder ORDER BY date_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS session
  FROM marked)
SELECT bidder, min(date_time) AS window_start, max(date_time) + INTERVAL '10 seconds' AS window_end,
       count(*) AS bid_count
FROM numbered
GROUP BY bidder, session`,
	},
	// Nexmark q3 with the seller's version valid at the auction's time. The
	// persons and the auctions are put in one relation, sorted per person by
	// time with a person's version before an auction at the same instant,
	// and each auction takes the last version before it (last_value IGNORE
	// NULLS over a struct that is NULL on auction rows). This gives the rows
	// of an ASOF JOIN (q3AsOf, compared in the tests) at a fraction of its
	// CPU: over 200k auctions and 102k person rows, 1.0 s against 3.7 s.
	"q3": {
		Name: "q3", Input: "auction", Persons: true, Key: []string{"state", "city", "window_start"},
		SQL: `WITH timeline AS (
  SELECT seller AS id, date_time, 1 AS side, category, initial_bid, NULL::STRUCT(city VARCHAR, state VARCHAR) AS place FROM src
  UNION ALL
  SELECT id, date_time, 0, NULL, NULL, {'city': city, 'state': state} FROM person),
joined AS (
  SELECT id, date_time, side, category, initial_bid,
         last_value(place IGNORE NULLS) OVER (PARTITION BY id ORDER BY date_time, side
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS place
  FROM timeline)
SELECT place.state AS state, place.city AS city, time_bucket(INTERVAL '10 seconds', date_time) AS window_start,
       count(*) AS auctions, count(DISTINCT id) AS sellers, sum(initial_bid) AS initial_bids
FROM joined
WHERE side = 1 AND category = 10 AND place.state IN ('OR', 'ID', 'CA')
GROUP BY place.state, place.city, window_start`,
	},
	// Nexmark q8: the (person, window) and (seller, window) groups of the
	// 10-second TUMBLE, joined on the person and the window. The key is
	// ubik's q8 GROUP BY: (id, name, window_start), one row each, since each
	// side has one row per (key, window).
	"q8": {
		Name: "q8", Input: "auction", Persons: true, Key: []string{"id", "name", "window_start"},
		SQL: `WITH new_persons AS (
  SELECT id, name, time_bucket(INTERVAL '10 seconds', date_time) AS window_start
  FROM person GROUP BY id, name, window_start),
new_sellers AS (
  SELECT seller, time_bucket(INTERVAL '10 seconds', date_time) AS window_start
  FROM src GROUP BY seller, window_start)
SELECT p.id, p.name, p.window_start
FROM new_persons p JOIN new_sellers a ON p.id = a.seller AND p.window_start = a.window_start`,
	},
	"q12": {
		Name: "q12", Input: "bids", Key: []string{"bidder", "window_start"},
		SQL: `SELECT bidder, time_bucket(INTERVAL '10 seconds', date_time) AS window_start, count(*) AS bid_count
FROM src
GROUP BY bidder, window_start`,
	},
	"q17": {
		Name: "q17", Input: "bids", Key: []string{"auction", "day"},
		SQL: `SELECT auction, CAST(date_time AS DATE) AS day,
       count(*) AS total_bids, min(price) AS min_price, max(price) AS max_price,
       avg(price) AS avg_price, sum(price) AS sum_price
FROM src
GROUP BY auction, day`,
	},
}

// q3AsOf is q3 as a user would write it first, with an ASOF JOIN (the
// person row of the seller with the greatest date_time at or before the
// auction's; bench/gen never gives two versions of a person the same
// time). The tests hold q3 to it.
var q3AsOf = Query{
	Name: "q3", Input: "auction", Persons: true, Key: []string{"state", "city", "window_start"},
	SQL: `SELECT p.state, p.city, time_bucket(INTERVAL '10 seconds', a.date_time) AS window_start,
       count(*) AS auctions, count(DISTINCT a.seller) AS sellers, sum(a.initial_bid) AS initial_bids
FROM src a ASOF JOIN person p ON a.seller = p.id AND a.date_time >= p.date_time
WHERE a.category = 10 AND p.state IN ('OR', 'ID', 'CA')
GROUP BY p.state, p.city, window_start`,
}

func queryNames() []string {
	names := make([]string, 0, len(queries))
	for n := range queries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// fullSQL is the statement that materializes the query's result into the
// table result: reading the file is part of the measured work, as it is for
// ubik. Timestamps use DuckDB's ISO 8601 cast (the column type is explicit);
// an explicit strptime format ('%Y-%m-%d %H:%M:%S.%g') was measured about
// 40% slower for the same result, which would flatter the comparison.
func fullSQL(q Query, input, persons string) string {
	body, sep := q.SQL, "\n"
	if rest, ok := strings.CutPrefix(body, "WITH "); ok {
		body, sep = rest, ",\n" // the query's own CTEs follow src
	}
	var person string
	if q.Persons {
		person = fmt.Sprintf(`,
person AS (
  SELECT * FROM read_json(%s, format = 'newline_delimited', columns = %s)
)`, sqlString(persons), columns["person"])
	}
	return fmt.Sprintf(`CREATE TEMP TABLE result AS
WITH src AS (
  SELECT * FROM read_json(%s, format = 'newline_delimited', columns = %s)
)%s%s%s`, sqlString(input), columns[q.Input], person, sep, body)
}
