-- Nexmark q8 (monitor new users): the persons who opened an auction in the
-- 10-second window in which they entered the system. Persons and auctions
-- are each a TUMBLE view emitted once its window closes (EMIT FINAL), per
-- (person, window) and per (seller, window); the two views are joined on the
-- person and the window's start. Inputs: bench/gen --kind person and
-- --kind auction, read from person.jsonl and auction.jsonl in the script's
-- folder (bench/run runs a copy of the script where it links them). A person's later versions (a
-- move) are rows of the person stream too, as in Nexmark's person stream.
CREATE SOURCE person (id BIGINT, name VARCHAR, email VARCHAR, city VARCHAR, state VARCHAR, date_time TIMESTAMP,
                      WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl', path = 'person.jsonl');

CREATE SOURCE auction (id BIGINT, item_name VARCHAR, seller BIGINT, category BIGINT, initial_bid BIGINT, reserve BIGINT,
                       date_time TIMESTAMP, expires TIMESTAMP,
                       WATERMARK FOR date_time AS date_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl', path = 'auction.jsonl');

CREATE VIEW new_persons AS
SELECT id, name, TUMBLE_START(date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS versions
FROM person
GROUP BY id, name, TUMBLE(date_time, INTERVAL '10' SECOND)
EMIT FINAL;

CREATE VIEW new_sellers AS
SELECT seller, TUMBLE_START(date_time, INTERVAL '10' SECOND) AS window_start, count(*) AS auctions
FROM auction
GROUP BY seller, TUMBLE(date_time, INTERVAL '10' SECOND)
EMIT FINAL;

-- The top query keeps ubik's rule that a query aggregates: it groups the
-- joined rows by the person, its name and the window (a TUMBLE of the same
-- 10 seconds over the views' window start, so each joined row falls in its
-- own window). Each side has one final row per (key, window), so the join
-- has one row per (id, name, window) and this GROUP BY gives exactly
-- Nexmark q8's rows.
CREATE VIEW q8 AS
SELECT p.id, p.name, TUMBLE_START(p.window_start, INTERVAL '10' SECOND) AS window_start
FROM new_persons p
JOIN new_sellers a ON p.id = a.seller AND p.window_start = a.window_start
GROUP BY p.id, p.name, TUMBLE(p.window_start, INTERVAL '10' SECOND)
EMIT FINAL;
