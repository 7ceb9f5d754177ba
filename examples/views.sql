-- Per-merchant minute totals, and hourly totals computed from them: a query
-- over another query's final rows (see "Queries over views" in README.md).
CREATE SOURCE events (
  event_id   VARCHAR,
  merchant   VARCHAR,
  customer   VARCHAR,
  amount     DOUBLE,
  event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND
) WITH (format = 'jsonl', path = 'events.jsonl');

CREATE VIEW minute_totals AS
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total
FROM events
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)
EMIT FINAL;

CREATE VIEW hourly AS
SELECT merchant, TUMBLE_START(window_start, INTERVAL '1' HOUR) AS hour,
       sum(orders) AS orders, sum(total) AS total, count(*) AS minutes
FROM minute_totals
GROUP BY merchant, TUMBLE(window_start, INTERVAL '1' HOUR);
