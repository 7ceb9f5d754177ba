-- Hourly usage per customer, for billing, and the hourly charge at the
-- price each event's plan had when the event happened.
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
  plan     VARCHAR,
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

-- The price plans: a versioned table. A plan's price changes at any
-- instant, mid-hour too; a row is the price valid from valid_from on, until
-- the plan's next row. The file is read whole before the events.
CREATE TABLE prices (
  plan       VARCHAR,
  price      DECIMAL(12,6),
  valid_from TIMESTAMP,
  PRIMARY KEY (plan) NOT ENFORCED,
  WATERMARK FOR valid_from AS valid_from - INTERVAL '5' SECOND
) WITH (format = 'jsonl', path = 'prices.jsonl');

-- The hourly charge: each event at the price of its plan valid at the
-- event's time (an event-time temporal join: the latest version at or
-- before u.ts), so an hour with a price change is billed at both prices.
-- qty * price is DECIMAL(30,15) and its sum DECIMAL(38,15): exact. Emitted
-- once per (customer, hour), when the watermark passes the hour's end.
-- From files: ubik run --query hourly_charge --input events.jsonl, in the
-- folder of prices.jsonl. Over Kafka: declare the table WITH (connector =
-- 'kafka', topic = '...'), the price versions keyed by plan.
CREATE VIEW hourly_charge AS
SELECT u.customer,
       TUMBLE_START(u.ts, INTERVAL '1' HOUR) AS hour,
       sum(u.qty * p.price) AS charge,
       count(*) AS events
FROM usage_events u
JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.plan = p.plan
GROUP BY u.customer, TUMBLE(u.ts, INTERVAL '1' HOUR);
