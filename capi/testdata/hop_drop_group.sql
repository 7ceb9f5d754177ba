-- HOP windows per customer; the SELECT drops the group column, the key keeps it.
CREATE SOURCE events (
  event_id   VARCHAR,
  merchant   VARCHAR,
  customer   VARCHAR,
  amount     DOUBLE,
  event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (format = 'jsonl');

SELECT HOP_START(event_time, INTERVAL '30' SECOND, INTERVAL '1' MINUTE) AS ws,
       count(*) AS n, min(amount) AS smallest
FROM events
GROUP BY customer, HOP(event_time, INTERVAL '30' SECOND, INTERVAL '1' MINUTE);
