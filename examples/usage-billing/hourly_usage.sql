-- Hourly usage per customer, for billing.
--
-- Producers retry, so the input holds copies of some events (same event_id,
-- same payload, arriving later). dedup_key lets only the first copy of an
-- event_id reach the query, within dedup_within of event time: the same
-- copy the usage log keeps, so these totals and the invoice agree. The
-- horizon covers the window (1 hour) plus the watermark delay (3 minutes),
-- as the README asks, with room to spare for the retries.
--
-- qty is DECIMAL with 18 significant digits, and sum(DECIMAL(18,9)) is
-- DECIMAL(38,9): exact, printed with its nine fractional digits as the usage
-- log prints its sums, so a total equals the log's text digit for digit.
CREATE SOURCE usage_events (
  event_id VARCHAR,
  customer VARCHAR,
  qty      DECIMAL(18,9),
  ts       TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' MINUTE
) WITH (format = 'jsonl', dedup_key = 'event_id', dedup_within = '2 hours');

-- The key is ["<customer>", "<hour>"]: one identity per (customer, hour).
-- Each hour is published early (a provisional total every half second
-- while it is open), then once more, final, when the watermark passes its
-- end.
CREATE VIEW hourly_usage AS
SELECT customer,
       TUMBLE_START(ts, INTERVAL '1' HOUR) AS hour,
       sum(qty) AS total,
       count(*) AS events
FROM usage_events
GROUP BY customer, TUMBLE(ts, INTERVAL '1' HOUR)
EMIT EARLY EVERY INTERVAL '500' MILLISECOND;
