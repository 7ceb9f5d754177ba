-- Per-merchant one-minute totals, final records only.
CREATE SOURCE events (
  event_id   VARCHAR,
  merchant   VARCHAR,
  customer   VARCHAR,
  amount     DOUBLE,
  event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND
) WITH (format = 'jsonl');

SELECT merchant,
       TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total, max(amount) AS biggest, avg(amount) AS mean
FROM events
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE);
