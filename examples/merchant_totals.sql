-- Per-merchant one-minute totals, published early every second and settled
-- once the watermark passes the end of each minute.
CREATE SOURCE events (
  event_id   VARCHAR,
  merchant   VARCHAR,
  customer   VARCHAR,
  amount     DOUBLE,
  event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND
) WITH (format = 'jsonl', path = 'events.jsonl');

CREATE VIEW merchant_totals AS
SELECT merchant,
       TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*)    AS orders,
       sum(amount) AS total,
       max(amount) AS biggest
FROM events
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)
EMIT EARLY EVERY INTERVAL '1' SECOND;
