-- The standard query (docs/performance.md): per merchant, a 1-minute
-- event-time TUMBLE with count, sum and max, emitted early every second.
-- Input: bench/gen --kind merchant.
CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount DOUBLE, event_time TIMESTAMP,
                      WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)
  WITH (format = 'jsonl');

CREATE VIEW merchant_totals AS
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total, max(amount) AS biggest
FROM events
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)
EMIT EARLY EVERY INTERVAL '1' SECOND;
