-- Sessions per (merchant, customer) with a 20-second gap.
CREATE SOURCE events (
  event_id   VARCHAR,
  merchant   VARCHAR,
  customer   VARCHAR,
  amount     DOUBLE,
  event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND
) WITH (format = 'jsonl');

SELECT merchant, customer,
       SESSION_START(event_time, INTERVAL '20' SECOND) AS s,
       SESSION_END(event_time, INTERVAL '20' SECOND) AS e,
       count(*) AS n, sum(amount) AS total
FROM events
GROUP BY merchant, customer, SESSION(event_time, INTERVAL '20' SECOND);
